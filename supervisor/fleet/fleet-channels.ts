import type { Redis } from 'ioredis';

/**
 * The node's one subscriber connection (a subscribed Redis connection can issue nothing else):
 * every fleet channel a node listens to shares it. ioredis subscribes again after a reconnect.
 */
export class FleetChannels {
  private subscriber: Redis | null = null;
  private readonly handlers = new Map<string, (message: string) => void>();

  constructor(private readonly redis: Redis) {}

  async listen(channel: string, onMessage: (message: string) => void): Promise<void> {
    if (this.subscriber === null) {
      const subscriber = this.redis.duplicate();
      subscriber.on('error', () => undefined);
      subscriber.on('message', (from: string, message: string) => this.handlers.get(from)?.(message));
      this.subscriber = subscriber;
    }
    this.handlers.set(channel, onMessage);
    await this.subscriber.subscribe(channel);
  }

  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = null;
    this.handlers.clear();
    if (subscriber) await subscriber.quit().catch(() => subscriber.disconnect());
  }
}
