package ratelimit

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strconv"
	"strings"
)

// Script mode: a module call sent to the Lua library lua/ratelimit.lua
// instead, for a Redis without the module. The call is turned mechanically:
// the module command's keys become the script's keys, its name the first
// argument, its other arguments the rest. As a Redis Function (FCALL) where
// a node allows it, else EVALSHA, and EVAL after NOSCRIPT.

//go:generate cp ../../lua/ratelimit.lua ratelimit.lua

// luaSource is the copy of lua/ratelimit.lua made by go generate (a test fails when they differ).
//
//go:embed ratelimit.lua
var luaSource string

// luaSHA is the script's SHA1, for EVALSHA.
var luaSHA = func() string {
	sum := sha1.Sum([]byte(luaSource))
	return hex.EncodeToString(sum[:])
}()

// LibraryName is the Redis Function library's name, ratelimit_<v>, and its
// one function's: <v> is the first 12 hex digits of the script's SHA1, so two
// versions of an app (a rolling deploy) each call their own. Old versions
// stay loaded until removed (FUNCTION DELETE ratelimit_<old v>).
var LibraryName = "ratelimit_" + luaSHA[:12]

// functionSource is what FUNCTION LOAD gets: the header, the line naming the function, the file.
var functionSource = "#!lua name=" + LibraryName + "\nlocal RATELIMIT_FUNCTION = '" + LibraryName + "'\n" + luaSource

// scriptArgs is a module call's arguments for the script: numkeys key... COMMAND args...
func scriptArgs(call []string) []string {
	count := 1
	rest := call[1:]
	if strings.EqualFold(call[0], "RL.MULTI") && len(rest) > 0 {
		count, _ = strconv.Atoi(rest[0])
		rest = rest[1:]
	}
	count = min(max(count, 0), len(rest))
	args := make([]string, 0, len(call)+1)
	args = append(args, strconv.Itoa(count))
	args = append(args, rest[:count]...)
	args = append(args, call[0])
	return append(args, rest[count:]...)
}

// keysOf is a module call's keys.
func keysOf(call []string) []string {
	args := scriptArgs(call)
	count, _ := strconv.Atoi(args[0])
	return args[1 : 1+count]
}

// evalsha runs a module call as the script with EVALSHA, and EVAL with the
// source when the node has not cached it (NOSCRIPT: a restart, a failover,
// SCRIPT FLUSH, a node that never ran it; that call did not run).
func evalsha(ctx context.Context, client Client, key string, call []string, late func(any)) (any, error) {
	args := scriptArgs(call)
	reply, err := do(ctx, client, key, late, append([]string{"EVALSHA", luaSHA}, args...))
	if replyCode(err) == "NOSCRIPT" {
		reply, err = do(ctx, client, key, late, append([]string{"EVAL", luaSource}, args...))
	}
	return reply, explainEvalACL(err)
}

// explainEvalACL: a user whose ACL forbids EVALSHA or EVAL cannot use script mode.
func explainEvalACL(err error) error {
	if replyCode(err) != "NOPERM" || !strings.Contains(strings.ToLower(err.Error()), "eval") {
		return err
	}
	return &ModeError{Message: "NOPERM this Redis user's ACL forbids EVALSHA/EVAL, which script mode needs (it runs lua/ratelimit.lua " +
		"where the redis-ratelimit module is not loaded): allow them (ACL SETUSER <user> +evalsha +eval), or load the module", Err: err}
}

// fcall runs a module call as the library's function. loaded is false when
// the node answered that the function is not there (load it, then call again).
func fcall(ctx context.Context, client Client, key string, call []string, late func(any)) (reply any, err error) {
	return do(ctx, client, key, late, append([]string{"FCALL", LibraryName}, scriptArgs(call)...))
}

// functionMissing: FCALL of a library the node does not have.
func functionMissing(err error) bool {
	return replyCode(err) == "ERR" && strings.Contains(strings.ToLower(err.Error()), "function not found")
}

// loadFunction loads the library on key's node; "already exists" (another
// process loaded it first) is success.
func loadFunction(ctx context.Context, client Client, key string) error {
	_, err := client.Do(ctx, key, "FUNCTION", "LOAD", functionSource)
	if err != nil && replyCode(err) == "ERR" && strings.Contains(strings.ToLower(err.Error()), "already exists") {
		return nil
	}
	return err
}
