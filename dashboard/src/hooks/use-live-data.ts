import { useEffect, useReducer, type Dispatch } from 'react';
import type { ApiClient } from '../api/client.js';
import { INITIAL_LIVE_DATA, liveReducer, type LiveAction, type LiveData } from '../logic/live-data.js';
import { LiveStream } from '../live/live-stream.js';

/** Opens the live stream for as long as the component is mounted and folds it into LiveData. */
export function useLiveData(api: ApiClient): [LiveData, Dispatch<LiveAction>] {
  const [data, dispatch] = useReducer(liveReducer, INITIAL_LIVE_DATA);
  useEffect(() => {
    const stream = new LiveStream(api, {
      state: (snapshot) => dispatch({ type: 'snapshot', snapshot }),
      event: (event) => dispatch({ type: 'event', event }),
      status: (status) => dispatch({ type: 'status', status }),
    });
    stream.start();
    return () => stream.stop();
  }, [api]);
  return [data, dispatch];
}
