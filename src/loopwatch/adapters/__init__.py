"""Adapters: loopwatch inside agent frameworks and tools, one module each, imported only when used.

- :mod:`loopwatch.adapters.claude_code`: Claude Code command hooks (``loopwatch hook claude-code``):
  ``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``, ``UserPromptSubmit`` and ``Stop``, with session
  state in a SQLite file shared by the hook processes; ``--install`` / ``--uninstall`` edit ``settings.json``.
  Standard library only. :mod:`loopwatch.adapters.claude_code_relay`: the command hook that hands each event to a
  running hook service (``--install --relay URL``).
- :mod:`loopwatch.adapters.langchain`: LangChain v1 agents (``create_agent``) and LangGraph
  (``LoopwatchMiddleware``; extra ``langchain``).
- :mod:`loopwatch.adapters.openai_agents`: the OpenAI Agents SDK (``LoopwatchGuard``; extra ``openai-agents``).
- :mod:`loopwatch.adapters.pydantic_ai`: PydanticAI agents (``LoopwatchCapability``; extra ``pydantic-ai``).
- :mod:`loopwatch.adapters.autogen`: AutoGen AgentChat (``LoopwatchAutoGen``: a workbench that blocks, a model
  context that nudges, a termination condition that stops; extra ``autogen``).
- :mod:`loopwatch.adapters.smolagents`: smolagents (``LoopwatchAgent``, a ``ToolCallingAgent`` that refuses
  looping calls, and ``LoopwatchCallback`` for any agent; extra ``smolagents``).
- :mod:`loopwatch.adapters.claude_agent_sdk`: the Claude Agent SDK (``loopwatch_hooks`` for
  ``ClaudeAgentOptions(hooks=...)``; extra ``claude-agent-sdk``).
- :mod:`loopwatch.adapters.crewai`: CrewAI (``LoopwatchCrewAI``: before-tool-call and before-LLM-call hooks for
  one run of one crew; extra ``crewai``).
- :mod:`loopwatch.adapters.litellm`: LiteLLM (``LoopwatchGuardrail``: an SDK callback and a proxy guardrail that
  judges each request's new messages and the model's response; extra ``litellm``).
- :mod:`loopwatch.adapters.mcp`: ``loopwatch mcp-proxy -- <server command>``, a stdio MCP proxy that refuses
  looping tool calls with ``isError`` results. Standard library only.

Nothing is imported here, so ``python -m loopwatch.adapters.<name>`` loads only the adapter it runs.
"""

__all__: list[str] = []
