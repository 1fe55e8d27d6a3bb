"""Agent runners: user code that plays one episode by talking to an OpenAI-compatible endpoint.

An agent runner is a class with `run_episode(seed, base_url, env_config) -> EpisodeResult`; roll names
it by class path in `custom_envs.<tag>.agent_runner_cls` and the ProxyEnvManager runs it (see
docs/agents.md). Bundled: `gem_runner.GEMRunner` (a roll env played through chat) and
`tool_call_runner.ToolCallRunner` (the env's actions as OpenAI tools).
"""

from roll.pipeline.agentic.agent_runner.base import AgentRunner, EpisodeResult, as_episode_result

__all__ = ["AgentRunner", "EpisodeResult", "as_episode_result"]
