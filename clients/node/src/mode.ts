// The `mode` option: the module's commands (`module`), the Lua library
// (`script`), or per node whichever the node has (`auto`: the module where
// `COMMAND INFO RL.MULTI` knows it). The choice is kept per node
// connection and made again after that connection reconnects: the server
// behind an address may have been restarted or failed over, with or
// without the module.

import type { Mode } from './options.js';
import { RateLimitModeError, replyCode, type Connection, type NodeClient } from './redis.js';
import { callScript, splitCall } from './script.js';

/** Sends module calls to each node in the mode it needs. */
export class ModeSwitch {
  private readonly decided = new WeakMap<NodeClient, 'module' | 'script'>();
  private readonly watched = new WeakSet<NodeClient>();

  constructor(readonly mode: Mode) {}

  /** Sends `call`, a module command, to the node that gets `key`. */
  send(connection: Connection, key: string, call: string[]): Promise<unknown> {
    if (this.mode !== 'auto') return sendAs(this.mode, connection, key, call);
    const node = connection.nodeOf(key);
    const known = node && this.decided.get(node);
    if (known) return sendAs(known, connection, key, call);
    return this.decide(connection, key).then((mode) => sendAs(mode, connection, key, call));
  }

  private async decide(connection: Connection, key: string): Promise<'module' | 'script'> {
    let info: unknown;
    try {
      info = await connection.sendToNodeOf(key, ['COMMAND', 'INFO', 'RL.MULTI']);
    } catch (error) {
      if (replyCode(error) !== 'NOPERM') throw error;
      throw new RateLimitModeError(
        'NOPERM mode \'auto\' asks COMMAND INFO RL.MULTI whether the redis-ratelimit module is loaded, and this Redis ' +
          'user\'s ACL forbids it: allow it (ACL SETUSER <user> +command|info), or set mode \'module\' or \'script\'',
        error,
      );
    }
    const mode = Array.isArray(info) && info[0] != null ? 'module' : 'script'; // [null]: no such command
    const node = connection.nodeOf(key); // the node that answered: known now on a cluster even if not before
    if (node) {
      this.decided.set(node, mode);
      if (!this.watched.has(node)) {
        this.watched.add(node);
        node.on('ready', () => this.decided.delete(node));
      }
    }
    return mode;
  }
}

function sendAs(mode: 'module' | 'script', connection: Connection, key: string, call: string[]): Promise<unknown> {
  return mode === 'module' ? callModule(connection, key, call) : callScript(connection, key, call);
}

/** Sends a module command, explaining the errors that come from the module being absent or the other mode's keys. */
function callModule(connection: Connection, key: string, call: string[]): Promise<unknown> {
  // Not an async function: its frame was a promise and a resumption on every call.
  return connection.send(key, call).then(undefined, (error) => explainModuleError(connection, call, error));
}

/** The module's absence or the other mode's keys, said in words of what to do; other errors as they came. */
async function explainModuleError(connection: Connection, call: string[], error: unknown): Promise<never> {
  const code = replyCode(error);
  if (code === 'WRONGTYPE') throw await explainWrongType(connection, call, error);
  if (code === 'ERR' && /^ERR unknown command/i.test((error as Error).message)) {
    throw new RateLimitModeError(
      `ERR the redis-ratelimit module is not loaded on this Redis (unknown command '${call[0]}'), and mode 'module' ` +
        'needs it: load it (loadmodule /path/to/libredis_ratelimit.so), or use mode \'auto\' or \'script\' (the Lua script)',
      error,
    );
  }
  throw error;
}

/**
 * The module answers WRONGTYPE for a key of another Redis type, which may
 * be script-mode state, and for another algorithm's state: the key's TYPE
 * tells them apart (all keys of one call share a slot, so one node).
 */
async function explainWrongType(connection: Connection, call: string[], error: unknown): Promise<unknown> {
  for (const key of splitCall(call).keys) {
    const type = String(await connection.send(key, ['TYPE', key]));
    if (type === 'ratelimit' || type === 'none') continue;
    return new RateLimitModeError(
      `WRONGTYPE ${key} holds a Redis ${type}, not the redis-ratelimit module's state: script-mode state (script ` +
        'mode keeps plain Redis values) or another value; module mode cannot use it: give each mode its own key prefix',
      error,
    );
  }
  return error; // another algorithm's state: the module's own words say it
}
