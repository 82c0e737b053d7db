"""Build hook: the package ships a copy of the Lua library of script mode,
made from the one source, lua/ratelimit.lua at the repository's root, when
a wheel or an sdist is built from the repository. A wheel built from the
sdist takes the copy the sdist holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGED = "redis_ratelimit_client/ratelimit.lua"


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        source = root.parents[1] / "lua" / "ratelimit.lua"
        if source.is_file():
            target = PACKAGED if self.target_name == "wheel" else f"src/{PACKAGED}"
            build_data["force_include"][str(source)] = target
        elif not (root / "src" / PACKAGED).is_file():
            raise RuntimeError(f"{source} is missing: build from the repository, or from its sdist")
