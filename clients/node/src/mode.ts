// The `mode` option: the module's commands (`module`), the Lua library
// (`script`), or per node whichever the node has (`auto`: the module where
// `COMMAND INFO RL.MULTI` knows it). Script mode calls the library as a
// Redis Function (FCALL) where the node allows it, else with EVALSHA
// (option `scriptCall`). Both choices are kept per node connection and
// made again after that connection reconnects: the server behind an
// address may have been restarted or failed over, with or without the
// module, with or without the library.

import type { Mode, ScriptCall } from './options.js';
import { RateLimitModeError, replyCode, type Connection, type NodeClient } from './redis.js';
import { evalsha, fcall, functionMissing, LIBRARY, loadLibrary, splitCall, type ScriptLibrary } from './script.js';

/** How calls reach a node. */
type Route = 'module' | 'fcall' | 'evalsha';

/** Sends module calls to each node in the mode it needs. */
export class ModeSwitch {
  private readonly routes = new WeakMap<NodeClient, Route>();
  private readonly watched = new WeakSet<NodeClient>();
  /** The script's route until a node refuses Functions. */
  private readonly scriptRoute: Route;
  /** The line saying why EVALSHA replaces FCALL is written once. */
  private fellBack = false;

  constructor(
    readonly mode: Mode,
    private readonly scriptCall: ScriptCall,
    private readonly log: (line: string) => void,
    private readonly library: ScriptLibrary = LIBRARY,
  ) {
    this.scriptRoute = scriptCall === 'evalsha' ? 'evalsha' : 'fcall';
  }

  /** Sends `call`, a module command, to the node that gets `key`. */
  send(connection: Connection, key: string, call: string[]): Promise<unknown> {
    if (this.mode === 'module') return callModule(connection, key, call);
    const node = connection.nodeOf(key);
    const route = (node && this.routes.get(node)) ?? (this.mode === 'script' ? this.scriptRoute : undefined);
    if (route) return this.via(route, connection, key, call);
    return this.decide(connection, key).then((decided) => this.via(decided, connection, key, call));
  }

  private via(route: Route, connection: Connection, key: string, call: string[]): Promise<unknown> {
    if (route === 'module') return callModule(connection, key, call);
    if (route === 'evalsha') return evalsha(connection, key, call, this.library);
    // Not an async function: its frame was a promise and a resumption on every call.
    return fcall(connection, key, call, this.library).then(undefined, (error) => this.functionFailed(error, connection, key, call));
  }

  /**
   * FCALL failed: the node lacks the library (load it, call again once),
   * or refuses Functions (no FCALL: Redis 6.2, an ACL without it, FUNCTION
   * LOAD refused), where EVALSHA serves the node from then on (one log
   * line), or the call's own error, as it came.
   */
  private async functionFailed(error: unknown, connection: Connection, key: string, call: string[]): Promise<unknown> {
    let refused = error;
    if (functionMissing(error)) {
      try {
        await loadLibrary(connection, key, this.library);
      } catch (loadError) {
        if (replyCode(loadError) === undefined) throw loadError; // no answer: Redis unavailable
        refused = loadError; // FUNCTION LOAD refused: an ACL, a read-only replica, FUNCTION renamed or disabled
      }
      if (refused === error) {
        try {
          return await fcall(connection, key, call, this.library);
        } catch (again) {
          if (!functionMissing(again)) throw again;
          refused = again;
        }
      }
    } else if (!(replyCode(error) === 'NOPERM' && /'fcall'/i.test((error as Error).message)) && !unknownCommand(error)) {
      throw error; // the call's own error (a key of another type, an ACL on the keys...)
    }
    if (this.scriptCall === 'fcall') {
      throw new RateLimitModeError(
        `scriptCall 'fcall': this node refuses Redis Functions (${String((refused as Error).message)}): allow them ` +
          "(ACL SETUSER <user> +fcall +function|load), or set scriptCall 'auto' to fall back to EVALSHA",
        refused,
      );
    }
    if (!this.fellBack) {
      this.fellBack = true;
      this.log(`rate limiter: script mode calls the Lua library with EVALSHA, not FCALL, where Redis Functions are refused: ${String((refused as Error).message)}`);
    }
    this.remember(connection.nodeOf(key), 'evalsha');
    return evalsha(connection, key, call, this.library);
  }

  private async decide(connection: Connection, key: string): Promise<Route> {
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
    const route = Array.isArray(info) && info[0] != null ? 'module' : this.scriptRoute; // [null]: no such command
    this.remember(connection.nodeOf(key), route); // the node that answered: known now on a cluster even if not before
    return route;
  }

  /** Keeps a node's route until that node's client reconnects. */
  private remember(node: NodeClient | undefined, route: Route) {
    if (!node) return;
    this.routes.set(node, route);
    if (!this.watched.has(node)) {
      this.watched.add(node);
      node.on('ready', () => this.routes.delete(node));
    }
  }
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
  if (unknownCommand(error)) {
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

/** A server without the command (FCALL before Redis 7, a renamed or disabled command). */
function unknownCommand(error: unknown): boolean {
  return replyCode(error) === 'ERR' && /^ERR unknown command/i.test((error as Error).message);
}
