"""Context Workbench's core: projects, conversations, requests, tools and runs, without Qt.

Its floors, bottom to top. A module imports from its own floor and those below, never from one
above (tests/unit/test_layering.py checks it, every import counted):

    1 ground     model, todo, last_turn, approval_seal, questions, tool_names, redact,
                 json_text, confined, threads, give_way, stand_ins: values and small helpers
    2 store      store/, settings, trust, checkpoints/: what is kept on disk
    3 llm        llm/, cost: talking to a model, and what that costs
    4 workflows  workflows/: a workflow's steps, a run's state and its cache file
    5 tools      tools/, mcp, mcp_state, mcp_calls, mcp_stdio, mcp_text, agents,
                 project_files: what the model can call
    6 context    context/, attachments, turn_events, log_writer: what a request is made of,
                 and the project context that builds it and owns the one log writer
    7 engine     engine, exchange, summarize, request_copies, titles, interchange, factory:
                 a turn, and what works beside it
    8 runs       runs/: the driver that drives a run through its steps
"""
