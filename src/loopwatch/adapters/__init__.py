"""Adapters: loopwatch inside agent frameworks and tools, one module each, imported only when used.

- :mod:`loopwatch.adapters.claude_code`: Claude Code command hooks (``loopwatch hook claude-code``):
  ``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``, ``UserPromptSubmit`` and ``Stop``, with session
  state in a SQLite file shared by the hook processes; ``--install`` / ``--uninstall`` edit ``settings.json``.
  Standard library only.
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

Nothing is imported here, so ``python -m loopwatch.adapters.<name>`` loads only the adapter it runs.
"""
