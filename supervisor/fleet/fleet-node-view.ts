import type { FleetNodeInstance, FleetNodeView } from '../../shared/api/views.js';
import { MAX_POOL_SIZE } from '../../shared/config/index.js';
import { booleanField, InvalidStoredRecord, listField, numberField, objectField, parseObject, stringField } from '../state/stored-value.js';

/** Longest text a summary field may hold (a health state, an address, a fingerprint, a time). */
const MAX_FIELD_LENGTH = 64;
/** Longest shortage note (a sentence about the catalog). */
const MAX_SHORTAGE_LENGTH = 512;

/**
 * A node's summary as another node published it in Redis, checked field by field as the durable
 * state's records are (it is shown to API callers); null when it is not one, so that a record
 * written by anything else is left out rather than passed on.
 */
export function readFleetNodeView(node: string, text: string): FleetNodeView | null {
  try {
    const o = parseObject(text);
    if (stringField(o, 'node', MAX_FIELD_LENGTH) !== node) throw new InvalidStoredRecord('node: does not match its key');
    const instances = listField(o, 'instances', MAX_POOL_SIZE).map((item, i): FleetNodeInstance => {
      const name = `instances[${i}]`;
      const x = objectField({ [name]: item }, name);
      return {
        id: numberField(x, 'id', 0, MAX_POOL_SIZE),
        ready: booleanField(x, 'ready'),
        state: stringField(x, 'state', MAX_FIELD_LENGTH),
        exit_ip: stringField(x, 'exit_ip', MAX_FIELD_LENGTH),
        exit_country: stringField(x, 'exit_country', MAX_FIELD_LENGTH),
        exit_fingerprint: stringField(x, 'exit_fingerprint', MAX_FIELD_LENGTH),
        // Absent in a summary a node of an older version published.
        exit_shortage: x.exit_shortage === undefined ? '' : stringField(x, 'exit_shortage', MAX_SHORTAGE_LENGTH),
        sessions: numberField(x, 'sessions', 0, Number.MAX_SAFE_INTEGER),
        requests: numberField(x, 'requests', 0, Number.MAX_SAFE_INTEGER),
      };
    });
    const updated = stringField(o, 'updated_at', MAX_FIELD_LENGTH);
    if (Number.isNaN(Date.parse(updated))) throw new InvalidStoredRecord('updated_at: not a time');
    return {
      node,
      updated_at: updated,
      routable: numberField(o, 'routable', 0, MAX_POOL_SIZE),
      sessions: numberField(o, 'sessions', 0, Number.MAX_SAFE_INTEGER),
      instances,
    };
  } catch (error) {
    if (error instanceof InvalidStoredRecord) return null;
    throw error;
  }
}
