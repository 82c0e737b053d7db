// Script mode: a module call sent to the Lua library lua/ratelimit.lua
// instead, for a Redis without the module (managed Redis). The call is
// translated mechanically: the module command's keys become the keys, its
// name the first argument, its other arguments the rest. As a Redis
// Function where the server has Functions (FCALL of the library
// ratelimit_<v>, loaded with FUNCTION LOAD where a node lacks it), else as
// a script (EVALSHA; EVAL when the node has not cached it: NOSCRIPT after a
// failover, SCRIPT FLUSH, a restart, another node).

import { createHash } from 'node:crypto';

import { RATELIMIT_LUA } from './ratelimit-lua.js';
import { RateLimitModeError, replyCode, type Connection } from './redis.js';

/** A copy of lua/ratelimit.lua as the server gets it: its EVALSHA digest and its form as a function library. */
export interface ScriptLibrary {
  source: string;
  sha1: string;
  /** `ratelimit_<v>`, v the first 12 hex digits of the SHA1: the library's and its one function's name. */
  name: string;
  /** What FUNCTION LOAD gets: the header, the line naming the function, the file unchanged. */
  functionSource: string;
}

export function scriptLibrary(source: string): ScriptLibrary {
  const sha1 = createHash('sha1').update(source).digest('hex');
  const name = `ratelimit_${sha1.slice(0, 12)}`;
  return { source, sha1, name, functionSource: `#!lua name=${name}\nlocal RATELIMIT_FUNCTION = '${name}'\n${source}` };
}

/** The package's copy. */
export const LIBRARY = scriptLibrary(RATELIMIT_LUA);

/** A module call's parts: `RL.MULTI numkeys key... args...` or `RL.X key args...`. */
export function splitCall([command, ...rest]: string[]): { command: string; keys: string[]; args: string[] } {
  const count = command.toUpperCase() === 'RL.MULTI' ? Number(rest.shift()) : 1;
  return { command, keys: rest.slice(0, count), args: rest.slice(count) };
}

/** The library's arguments for a module call: `numkeys key... COMMAND args...`. */
export function scriptArgs(call: string[]): string[] {
  const { command, keys, args } = splitCall(call);
  return [String(keys.length), ...keys, command, ...args];
}

/** Runs a module call as the library's function on the node that gets `key`. */
export function fcall(connection: Connection, key: string, call: string[], library: ScriptLibrary): Promise<unknown> {
  return connection.send(key, ['FCALL', library.name, ...scriptArgs(call)]);
}

/** FCALL of a library the node does not have (a new node, a restart without persistence, FUNCTION FLUSH). */
export function functionMissing(error: unknown): boolean {
  return replyCode(error) === 'ERR' && /function not found/i.test((error as Error).message);
}

/** Loads the library on the node that gets `key`; "already exists" (another process loaded it first) is success. */
export async function loadLibrary(connection: Connection, key: string, library: ScriptLibrary): Promise<void> {
  try {
    await connection.sendToNodeOf(key, ['FUNCTION', 'LOAD', library.functionSource]);
  } catch (error) {
    if (replyCode(error) !== 'ERR' || !/already exists/i.test((error as Error).message)) throw error;
  }
}

/** Runs a module call as the script on the node that gets `key`: EVALSHA, and EVAL after NOSCRIPT (that call did not run). */
export async function evalsha(connection: Connection, key: string, call: string[], library: ScriptLibrary): Promise<unknown> {
  const args = scriptArgs(call);
  try {
    return await connection.send(key, ['EVALSHA', library.sha1, ...args]);
  } catch (error) {
    if (replyCode(error) !== 'NOSCRIPT') throw explainAcl(error);
  }
  try {
    return await connection.send(key, ['EVAL', library.source, ...args]); // caches it on that node too
  } catch (error) {
    throw explainAcl(error);
  }
}

/** A user whose ACL forbids EVALSHA or EVAL (and Functions, or EVALSHA is not tried) cannot use script mode: say so, and what to do instead. */
function explainAcl(error: unknown): unknown {
  if (replyCode(error) !== 'NOPERM' || !/'eval(sha)?'/i.test(String((error as Error).message))) return error;
  return new RateLimitModeError(
    'NOPERM this Redis user\'s ACL forbids EVALSHA/EVAL, which script mode needs where it cannot call the library as a ' +
      'Redis Function (it runs lua/ratelimit.lua where the redis-ratelimit module is not loaded): allow them (ACL SETUSER ' +
      '<user> +evalsha +eval), or FCALL and FUNCTION LOAD (+fcall +function|load), or load the module',
    error,
  );
}
