// The suites run in both modes: mode 'module' on servers with the module,
// mode 'script' (the Lua library) on servers without it.

export const MODES: readonly { mode: 'module' | 'script'; withModule: boolean }[] = [
  { mode: 'module', withModule: true },
  { mode: 'script', withModule: false },
];
