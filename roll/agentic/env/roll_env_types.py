"""ROLL's env types that roll does not run, and what each one needs (a service, a package, data that
must be downloaded): the unknown-env_type error says it, and docs/configuration.md's table lists them."""

from __future__ import annotations

ROLL_ENV_NEEDS: dict[str, str] = {
    "webshop": "WebShop's shopping site: its product search index and data (ROLL's third_party/webshop-minimal)",
    "sokoban_mcp": "an MCP server that serves the Sokoban game",
    "swe_env": "SWE-bench task containers (ROLL starts them through its ROCK sandbox service)",
    "tb_env": "Terminal-Bench task containers (ROLL's ROCK sandbox service)",
    "tb_native_env": "Terminal-Bench task containers (ROLL's ROCK sandbox service)",
    "rock_tb_native_env": "Terminal-Bench task containers (ROLL's ROCK sandbox service)",
    "cli": "a command-line sandbox container (ROLL's ROCK sandbox service)",
    "alfworld": "the ALFWorld package and its game files, which are downloaded",
    "deepeyes": "a vision-language model, image data and its image tools",
}
