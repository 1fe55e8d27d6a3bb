"""The tool-using env (``env_type: tool_use``): tasks solved with a sandboxed Python tool."""
