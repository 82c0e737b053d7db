// The Redis client the app passes: node-redis (single or createCluster) or
// ioredis (single or Cluster), told apart by its shape. The limiter sends
// its commands on a connection of its own made with the client's
// duplicate(), with the offline queue off, so that a call that timed out
// can be cancelled by closing that connection: a command still waiting in
// Redis (under CLIENT PAUSE, say) is dropped with it, and nothing queued
// in the client is replayed after a reconnect.

import { RateLimitConfigError } from './options.js';
import { keySlot } from './slot.js';

/** What the limiter needs from a connection. */
export interface Connection {
  /** Sends one command; `key` routes it on a cluster. */
  send(key: string, args: string[]): Promise<unknown>;
  /** Sends a command without keys to the node that serves `key` (a cluster client would pick any node for it). */
  sendToNodeOf(key: string, args: string[]): Promise<unknown>;
  /** Closes the connection at once, dropping what is in flight. */
  close(): void;
  /** Settles when the connection can take commands. */
  ready: Promise<void>;
  /**
   * The client object of the node that gets `key` (the one connection on
   * a single server), when known: it emits 'ready' after each reconnect.
   */
  nodeOf(key: string): NodeClient | undefined;
}

/** A node's connection, as node-redis and ioredis both have it. */
export interface NodeClient {
  on(event: 'ready', listener: () => void): unknown;
}

/** How to make a connection of our own from the app's client. */
export interface ClientKind {
  name: 'node-redis' | 'node-redis cluster' | 'ioredis' | 'ioredis cluster';
  open(): Connection;
}

type Anything = Record<string, any>;

function waitForReady(client: Anything): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const fail = (error: unknown) => {
      client.off('ready', ready);
      reject(error);
    };
    const ready = () => {
      client.off('error', fail);
      resolve();
    };
    client.once('ready', ready);
    client.once('error', fail);
  });
}

/** node-redis's connect(), failing at the first error (a refused connection) instead of waiting through its reconnects. */
function connectOrFail(own: Anything): Promise<void> {
  return new Promise((resolve, reject) => {
    own.once('error', reject);
    own.connect().then(() => {
      own.off('error', reject);
      resolve();
    }, reject);
  });
}

function closeNodeRedis(own: Anything) {
  try {
    const closing = typeof own.destroy === 'function' ? own.destroy() : own.disconnect();
    closing?.catch?.(() => {});
  } catch {
    // already closed
  }
}

/**
 * ioredis's disconnect() only half-closes: the socket still reads, so a
 * late reply would still come, and it lingers while a peer that is gone
 * never closes its side. Destroyed too, as node-redis's destroy() does.
 */
function closeIoredis(own: Anything, nodes: Anything[]) {
  own.disconnect();
  for (const node of nodes) node.stream?.destroy?.();
}

function nodeRedis(client: Anything): ClientKind {
  return {
    name: 'node-redis',
    open() {
      const own = client.duplicate({ disableOfflineQueue: true });
      own.on('error', () => {}); // failures surface as rejected commands
      return {
        ready: connectOrFail(own),
        send: (_key, args) => own.sendCommand(args),
        sendToNodeOf: (_key, args) => own.sendCommand(args),
        close: () => closeNodeRedis(own),
        nodeOf: () => own,
      };
    },
  };
}

function nodeRedisCluster(cluster: Anything): ClientKind {
  const options = cluster._options ?? cluster.options;
  if (options === undefined) {
    // node-redis v4 keeps its options private: a duplicate could not keep the
    // app's `defaults` (password, TLS) while turning the offline queue off.
    throw new RateLimitConfigError('redis', 'a node-redis v4 cluster cannot be used: upgrade to node-redis v5 or later, or pass an ioredis Cluster');
  }
  return {
    name: 'node-redis cluster',
    open() {
      const defaults = { ...options.defaults, disableOfflineQueue: true };
      const own = cluster.duplicate({ defaults });
      own.on('error', () => {});
      const primaryOf = (key: string): Anything | undefined => own.slots?.[keySlot(key)]?.master;
      return {
        ready: connectOrFail(own),
        send: (key, args) => own.sendCommand(key, false, args),
        // On the node's own client: node-redis v6 routes a command without keys by its command tips, not by the key given.
        sendToNodeOf: async (key, args) => (await own.nodeClient(primaryOf(key) ?? noPrimary(key))).sendCommand(args),
        close: () => closeNodeRedis(own),
        nodeOf: (key) => primaryOf(key)?.client,
      };
    },
  };
}

function ioredis(client: Anything): ClientKind {
  return {
    name: 'ioredis',
    open() {
      const own = client.duplicate({ enableOfflineQueue: false, lazyConnect: false, maxRetriesPerRequest: 0 });
      own.on('error', () => {});
      return {
        ready: waitForReady(own),
        send: (_key, [command, ...args]) => own.call(command, ...args),
        sendToNodeOf: (_key, [command, ...args]) => own.call(command, ...args),
        close: () => closeIoredis(own, [own]),
        nodeOf: () => own,
      };
    },
  };
}

/**
 * ioredis sends a command it does not know (a module's) to any node and
 * relies on a MOVED reply to find the right one: a round trip more, and
 * only as good as the module's key declaration. The limiter picks the
 * primary of the key's slot itself, and follows MOVED once when the slot
 * has moved since.
 */
function ioredisCluster(cluster: Anything): ClientKind {
  return {
    name: 'ioredis cluster',
    open() {
      const options = cluster.options ?? {};
      const own = cluster.duplicate([], {
        enableOfflineQueue: false,
        lazyConnect: false,
        redisOptions: { ...options.redisOptions, enableOfflineQueue: false },
      });
      own.on('error', () => {});
      const primaryOf = (key: string): Anything | undefined => {
        const address = own.slots?.[keySlot(key)]?.[0];
        return own.nodes('master').find((node: Anything) => `${node.options.host}:${node.options.port}` === address);
      };
      const refresh = () => new Promise<void>((resolve) => own.refreshSlotsCache(() => resolve()));
      return {
        ready: waitForReady(own),
        send: async (key, [command, ...args]) => {
          try {
            return await (primaryOf(key) ?? own).call(command, ...args);
          } catch (error) {
            if (!/^(MOVED|ASK) /.test(String((error as Error).message))) throw error;
            // The slot moved: learn the new layout, then ask its primary once.
            await refresh();
            return (primaryOf(key) ?? own).call(command, ...args);
          }
        },
        sendToNodeOf: async (key, [command, ...args]) => {
          if (!primaryOf(key)) await refresh(); // a node that went away is back in the pool after a refresh
          return (primaryOf(key) ?? noPrimary(key)).call(command, ...args);
        },
        close: () => closeIoredis(own, own.nodes?.() ?? []),
        nodeOf: (key) => primaryOf(key) as NodeClient | undefined,
      };
    },
  };
}

/** The cluster client knows no primary for the key's slot (the layout is changing): unavailable for now, never another node's answer. */
function noPrimary(key: string): never {
  throw new Error(`the cluster client knows no primary for the slot of ${key} yet`);
}

/** Tells which client the app passed, or throws naming the option. */
export function clientKind(redis: unknown): ClientKind {
  const client = redis as Anything;
  if (typeof client !== 'object' || client === null || typeof client.duplicate !== 'function') {
    throw new RateLimitConfigError('redis', 'must be a node-redis client or cluster (createClient/createCluster) or an ioredis Redis or Cluster');
  }
  if (client.isCluster === true && typeof client.nodes === 'function') return ioredisCluster(client);
  if (client.isCluster === false && typeof client.call === 'function') return ioredis(client);
  if (typeof client.sendCommand === 'function' && 'masters' in client) return nodeRedisCluster(client);
  if (typeof client.sendCommand === 'function' && typeof client.connect === 'function') return nodeRedis(client);
  throw new RateLimitConfigError('redis', 'is not a client this library knows: pass a node-redis or ioredis client');
}

/**
 * Error replies that mean "not now" rather than "wrong call". READONLY: a
 * primary demoted by a failover, which the limiter still talks to (the
 * command did not run there).
 */
const UNAVAILABLE_REPLIES = ['LOADING', 'BUSY', 'TRYAGAIN', 'CLUSTERDOWN', 'MASTERDOWN', 'MOVED', 'ASK', 'READONLY'];

/**
 * Redis answered, but the call cannot work as the server is set up (the
 * module missing, an ACL without EVAL, a key in the other mode's layout):
 * a server error like any error reply, with a message that says what to do.
 */
export class RateLimitModeError extends Error {
  constructor(message: string, readonly cause: unknown) {
    super(message);
    this.name = 'RateLimitModeError';
  }
}

/** node-redis's ErrorReply (and its subclasses) or ioredis's ReplyError, known without importing either. */
function isReply(error: unknown): boolean {
  for (let proto = Object.getPrototypeOf(error ?? {}); proto && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    const name = proto.constructor?.name;
    if (name === 'ErrorReply' || name === 'ReplyError') return true;
  }
  return false;
}

/**
 * True when Redis answered the call with an error (a bad argument, a key of
 * another type): a server error, never a reason to let traffic through.
 */
export function isErrorReply(error: unknown): boolean {
  if (error instanceof RateLimitModeError) return true;
  const code = replyCode(error);
  return code !== undefined && !UNAVAILABLE_REPLIES.includes(code) && !UNAVAILABLE_REPLIES.includes(scriptErrorCode(error) ?? '');
}

/**
 * The code of a Redis error raised inside the Lua library: on Redis 7.0 it
 * comes back as `ERR <code> ... script: ...` (the library raises it again
 * as text, which Redis prefixes with ERR), as when a replica refuses its write.
 */
function scriptErrorCode(error: unknown): string | undefined {
  return /^ERR ([A-Z]+) .* script: /s.exec(String((error as Error).message))?.[1];
}

/** The error code of an error reply (`ERR`, `NOSCRIPT`, `WRONGTYPE`...), undefined for other failures. */
export function replyCode(error: unknown): string | undefined {
  return isReply(error) ? String((error as Error).message).split(' ', 1)[0] : undefined;
}
