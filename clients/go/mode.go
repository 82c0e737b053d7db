package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
)

// The Mode option: the module's commands, the Lua library, or per node
// whichever the node has (Auto asks COMMAND INFO RL.MULTI). Script mode
// calls the library as a Redis Function where the node allows it, else
// with EVALSHA. Both choices are kept per node and made again once the
// client has opened a new connection to it (the server behind an address
// may have restarted, with or without the module, without the library).

// route is how calls reach a node.
type route uint8

const (
	viaModule route = iota + 1
	viaFCall
	viaEvalSHA
)

type nodeRoute struct {
	generation uint64
	route      route
}

type modes struct {
	mode       Mode
	scriptCall ScriptCall
	client     Client
	logger     *slog.Logger

	mu     sync.RWMutex
	routes map[string]nodeRoute
	// fellBack: the line saying why EVALSHA replaces FCALL is written once per limiter.
	fellBack atomic.Bool
}

func newModes(client Client, mode Mode, scriptCall ScriptCall, logger *slog.Logger) *modes {
	return &modes{mode: mode, scriptCall: scriptCall, client: client, logger: logger, routes: map[string]nodeRoute{}}
}

// send sends call, a module command, to the node that serves key, as that
// node needs it; late, when not nil, gets a reply that came after ctx ended
// (Client.DoLate).
func (m *modes) send(ctx context.Context, key string, call []string, late func(any)) (any, error) {
	if m.mode == Module {
		return m.module(ctx, key, call, late)
	}
	node, generation := m.client.Node(key)
	r, err := m.routeOf(ctx, key, node, generation)
	if err != nil {
		return nil, err
	}
	if r == viaModule {
		reply, err := do(ctx, m.client, key, late, call)
		if !unknownCommand(err) {
			return m.explainModule(ctx, call, reply, err)
		}
		// The module went away (a restart the client did not show us): the
		// call did not run, so decide again and send it once more.
		m.set(node, generation, 0)
		if r, err = m.routeOf(ctx, key, node, generation); err != nil {
			return nil, err
		}
		if r == viaModule {
			return m.explainModule(ctx, call, reply, err)
		}
	}
	return m.script(ctx, key, node, generation, r, call, late)
}

// routeOf is the node's route, decided when not known for this generation.
func (m *modes) routeOf(ctx context.Context, key, node string, generation uint64) (route, error) {
	m.mu.RLock()
	known, ok := m.routes[node]
	m.mu.RUnlock()
	if ok && known.generation == generation && known.route != 0 {
		return known.route, nil
	}
	r := m.firstScriptRoute()
	if m.mode == Auto {
		loaded, err := m.moduleLoaded(ctx, key)
		if err != nil {
			return 0, err
		}
		if loaded {
			r = viaModule
		}
	}
	// A connection opened for the decision itself is not a reconnect.
	_, generation = m.client.Node(key)
	m.set(node, generation, r)
	return r, nil
}

func (m *modes) firstScriptRoute() route {
	if m.scriptCall == ScriptEvalSHA {
		return viaEvalSHA
	}
	return viaFCall
}

func (m *modes) set(node string, generation uint64, r route) {
	m.mu.Lock()
	m.routes[node] = nodeRoute{generation: generation, route: r}
	m.mu.Unlock()
}

// moduleLoaded asks the node COMMAND INFO RL.MULTI: [nil] when no such command.
func (m *modes) moduleLoaded(ctx context.Context, key string) (bool, error) {
	reply, err := m.client.Do(ctx, key, "COMMAND", "INFO", "RL.MULTI")
	if replyCode(err) == "NOPERM" {
		return false, &ModeError{Message: "NOPERM mode 'auto' asks COMMAND INFO RL.MULTI whether the redis-ratelimit module is loaded, " +
			"and this Redis user's ACL forbids it: allow it (ACL SETUSER <user> +command|info), or set Mode to Module or Script", Err: err}
	}
	if err != nil {
		return false, err
	}
	items, ok := reply.([]any)
	if !ok || len(items) != 1 {
		return false, fmt.Errorf("ratelimit: COMMAND INFO RL.MULTI: unexpected reply %s", describe(reply))
	}
	return items[0] != nil, nil
}

func (m *modes) module(ctx context.Context, key string, call []string, late func(any)) (any, error) {
	reply, err := do(ctx, m.client, key, late, call)
	return m.explainModule(ctx, call, reply, err)
}

// do sends args with client.Do, or with DoLate when late is not nil.
func do(ctx context.Context, client Client, key string, late func(any), args []string) (any, error) {
	if late != nil {
		return client.DoLate(ctx, key, late, args...)
	}
	return client.Do(ctx, key, args...)
}

// script sends call to the Lua library: FCALL (loading the library once
// when the node lacks it), or EVALSHA where Functions cannot be used.
func (m *modes) script(ctx context.Context, key, node string, generation uint64, r route, call []string, late func(any)) (any, error) {
	if r == viaEvalSHA {
		return evalsha(ctx, m.client, key, call, late)
	}
	reply, err := fcall(ctx, m.client, key, call, late)
	refused := error(nil)
	switch {
	case functionMissing(err):
		// A new node, a restart without persistence, FUNCTION FLUSH: load it, call again once.
		if loadErr := loadFunction(ctx, m.client, key); loadErr != nil {
			if !isAnswer(loadErr) {
				return nil, loadErr
			}
			refused = loadErr
		} else if reply, err = fcall(ctx, m.client, key, call, late); functionMissing(err) {
			refused = err
		}
	case replyCode(err) == "NOPERM" || unknownCommand(err):
		refused = err // an ACL without FCALL; a server without Functions (Redis 6.2)
	}
	if refused == nil {
		return reply, err
	}
	if m.scriptCall == ScriptFCall {
		return nil, &ModeError{Message: "scriptCall 'fcall': this node refuses Redis Functions (" + refused.Error() +
			"): allow them (ACL SETUSER <user> +fcall +function|load), or leave ScriptCall empty to fall back to EVALSHA", Err: refused}
	}
	if !m.fellBack.Swap(true) {
		m.logger.Warn("rate limiter: script mode calls the Lua library with EVALSHA, not FCALL, where Redis Functions are refused: " + refused.Error())
	}
	m.set(node, generation, viaEvalSHA)
	return evalsha(ctx, m.client, key, call, late)
}

func unknownCommand(err error) bool {
	return replyCode(err) == "ERR" && strings.HasPrefix(strings.ToLower(err.Error()), "err unknown command")
}

// explainModule puts the module's absence and the other mode's keys in words of what to do.
func (m *modes) explainModule(ctx context.Context, call []string, reply any, err error) (any, error) {
	switch {
	case err == nil:
		return reply, nil
	case unknownCommand(err):
		return nil, &ModeError{Message: fmt.Sprintf("ERR the redis-ratelimit module is not loaded on this Redis (unknown command '%s'), "+
			"and mode 'module' needs it: load it (loadmodule /path/to/libredis_ratelimit.so), or use mode 'auto' or 'script' (the Lua library)", call[0]), Err: err}
	case replyCode(err) == "WRONGTYPE":
		return nil, m.explainWrongType(ctx, call, err)
	}
	return nil, err
}

// explainWrongType: the module answers WRONGTYPE for a key of another Redis
// type (perhaps script-mode state) and for another algorithm's state; the
// key's TYPE tells them apart.
func (m *modes) explainWrongType(ctx context.Context, call []string, err error) error {
	for _, key := range keysOf(call) {
		reply, typeErr := m.client.Do(ctx, key, "TYPE", key)
		kind, _ := reply.(string)
		if typeErr != nil || kind == "ratelimit" || kind == "none" {
			continue
		}
		return &ModeError{Message: fmt.Sprintf("WRONGTYPE %s holds a Redis %s, not the redis-ratelimit module's state: script-mode state "+
			"(script mode keeps plain Redis values) or another value; module mode cannot use it: give each mode its own key prefix", key, kind), Err: err}
	}
	return err
}
