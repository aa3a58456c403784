#!/usr/bin/env python3
"""Regenerates encoder_goldens.json and parse_goldens.json from DeepSeek's reference encoder.

Usage: python3 generate_goldens.py PATH/TO/encoding_dsv4.py

The encoder is public (it ships with the DeepSeek-V4 checkpoints) but is not part of flint; this
script only imports it to record what it outputs for the cases below. chat_encoding_test.cpp
and completion_parser_test.cpp compare flint's encoder and parser against these files.
Needs only the Python standard library.
"""

import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_encoder(path):
    spec = importlib.util.spec_from_file_location("encoding_dsv4", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fn(name, description, properties, required=None, **extra):
    params = {"type": "object", "properties": properties}
    if required is not None:
        params["required"] = required
    function = {"name": name, "description": description, "parameters": params}
    function.update(extra)
    return {"type": "function", "function": function}


WEATHER = fn("get_weather", "Get the weather for a city.",
             {"city": {"type": "string", "description": "City name"},
              "days": {"type": "integer", "minimum": 1, "maximum": 14},
              "unit": {"type": "string", "enum": ["c", "f"]}},
             ["city"])
CALC = fn("calculate", "Evaluate numbers: 精确计算 ≥ 0.5 — ünïcödé",
          {"values": {"type": "array", "items": {"type": "number"}},
           "scale": {"type": "number", "default": 1.0, "exclusiveMinimum": 1e-05},
           "limit": {"type": "number", "maximum": 1e16, "minimum": -0.0},
           "options": {"type": "object", "properties": {"exact": {"type": "boolean"}}},
           "note": {"type": ["string", "null"]}},
          ["values"], strict=True)
NOARGS = fn("get_time", "Current time.", {})


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def tool(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}

MULTI_TURN = [
    SYSTEM,
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "reasoning_content": "Greeting.", "content": "Hello!"},
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "reasoning_content": "Add.", "content": "4"},
    {"role": "user", "content": "Thanks"},
]

TOOL_ROUNDS = [
    dict(SYSTEM, tools=[WEATHER, CALC, NOARGS]),
    {"role": "user", "content": "Weather in Paris and Oslo, and the time?"},
    {"role": "assistant", "reasoning_content": "Three calls.", "content": "Let me check.",
     "tool_calls": [
         call("c1", "get_weather", json.dumps({"city": "Paris", "days": 3})),
         call("c2", "get_weather", '{"city":"Oslo","unit":"c"}'),
         call("c3", "get_time", "{}")]},
    tool("c3", "12:00"),
    tool("c1", '{"temp": 21.5}'),
    tool("c2", [{"type": "text", "text": "cold"}, {"type": "image_url", "image_url": {}},
                {"type": "text", "text": "-3°C"}]),
    {"role": "user", "content": "Now compute."},
    {"role": "assistant", "reasoning_content": "Compute.", "tool_calls": [
        call("c4", "calculate", json.dumps({
            "values": [1, 2.5, -0.0, 1e16, 1e-05, 0.1, 123456789.125, 10**18],
            "scale": 1.0, "options": {"exact": True, "tags": ["a", "ß"]}, "note": None,
            "text": "line1\nline2 \"quoted\" \\ tab\t end ☃", "empty": ""}))]},
    tool("c4", "done"),
    {"role": "assistant", "reasoning_content": "Report.", "content": "All done."},
    {"role": "user", "content": "And again?"},
]

ODD_ARGUMENTS = [
    dict(SYSTEM, tools=[WEATHER]),
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "", "tool_calls": [
        call("a", "get_weather", "not json at all"),
        call("b", "get_weather", '{"city": "A<｜DSML｜parameter>B", "x": {"y": [true, false]}}'),
        call("c", "unknown_tool", '{"k": 1, "k": 2, "first": 0}')]},
    tool("b", "B"), tool("a", "A"), tool("zzz", "unmatched"), tool("c", "C"),
]

DEVELOPER_SEARCH = [
    {"role": "system", "content": "Search agent."},
    {"role": "developer", "content": "Old developer instruction."},
    {"role": "user", "content": "Question one"},
    {"role": "assistant", "reasoning_content": "r1", "content": "a1"},
    {"role": "developer", "content": "Current instruction.",
     "response_format": {"type": "json_object", "schema": {"a": 1}}},
    {"role": "assistant", "reasoning_content": "r2", "content": "a2"},
]

TASKS = [
    SYSTEM,
    {"role": "user", "content": "What is new?", "task": "query"},
    {"role": "assistant", "content": "news today"},
    {"role": "user", "content": "Is this source official?", "task": "authority"},
    {"role": "assistant", "content": "high"},
    {"role": "user", "content": "Which domain?", "task": "domain"},
    {"role": "assistant", "content": "general"},
    {"role": "user", "content": "Read https://example.com?", "task": "read_url"},
    {"role": "assistant", "content": "yes"},
    {"role": "user", "content": "Tell me a joke"},
    {"role": "assistant", "content": "A joke.", "task": "title"},
    {"role": "assistant", "content": "Jokes"},
    {"role": "user", "content": "Search the web?", "task": "action"},
]

ENCODER_CASES = [
    ("readme_quick_start", [SYSTEM, {"role": "user", "content": "What is 2+2?"}], {}),
    ("multi_turn_thinking_drop", MULTI_TURN, {}),
    ("multi_turn_thinking_keep", MULTI_TURN, {"drop_thinking": False}),
    ("multi_turn_chat", MULTI_TURN, {"thinking_mode": "chat"}),
    ("effort_max_thinking", MULTI_TURN, {"reasoning_effort": "max"}),
    ("effort_max_chat", MULTI_TURN, {"thinking_mode": "chat", "reasoning_effort": "max"}),
    ("effort_high_thinking", MULTI_TURN, {"reasoning_effort": "high"}),
    ("effort_max_no_system", [{"role": "user", "content": "Prove it."}],
     {"reasoning_effort": "max"}),
    ("no_bos", MULTI_TURN[:2], {"add_default_bos_token": False}),
    ("tool_rounds_thinking", TOOL_ROUNDS, {}),
    ("tool_rounds_chat", TOOL_ROUNDS, {"thinking_mode": "chat"}),
    ("tool_rounds_context", TOOL_ROUNDS, {"context": 6}),
    ("odd_arguments", ODD_ARGUMENTS, {}),
    ("developer_search_thinking", DEVELOPER_SEARCH, {}),
    ("developer_search_chat", DEVELOPER_SEARCH, {"thinking_mode": "chat"}),
    ("tasks_chat", TASKS, {"thinking_mode": "chat"}),
    ("tasks_thinking", TASKS, {}),
    ("merged_users", [
        {"role": "user", "content": "part one"},
        {"role": "user", "content": "part two"},
        {"role": "assistant", "content": "ok", "wo_eos": True},
    ], {}),
    ("reminder_after_user", [
        SYSTEM, {"role": "user", "content": "Hi"},
        {"role": "latest_reminder", "content": "2026-01-01"},
        {"role": "assistant", "reasoning_content": "x", "content": "y"},
        {"role": "user", "content": "again"},
        {"role": "latest_reminder", "content": "2026-01-02"},
    ], {}),
    ("context_drop_thinking", MULTI_TURN, {"context": 3}),
    ("context_chat", MULTI_TURN, {"context": 4, "thinking_mode": "chat"}),
    ("ends_with_assistant", MULTI_TURN[:5], {}),
    ("empty_system_with_tools", [
        {"role": "system", "tools": [WEATHER]},
        {"role": "user", "content": "Hi"},
    ], {}),
]


def encode(enc, messages, opts):
    context_len = opts.get("context", 0)
    kwargs = {
        "thinking_mode": opts.get("thinking_mode", "thinking"),
        "drop_thinking": opts.get("drop_thinking", True),
        "add_default_bos_token": opts.get("add_default_bos_token", True),
        "reasoning_effort": opts.get("reasoning_effort"),
    }
    import copy
    msgs = copy.deepcopy(messages)
    return enc.encode_messages(msgs[context_len:], context=msgs[:context_len] or None, **kwargs)


def completions(enc):
    """Assistant turns exactly as the encoder writes them, to be parsed back."""
    cases = []
    for name, messages in [("tool_rounds", TOOL_ROUNDS), ("multi_turn", MULTI_TURN)]:
        for mode in ("thinking", "chat"):
            prompt = encode(enc, messages, {"thinking_mode": mode, "drop_thinking": False})
            marker = "<｜Assistant｜>" + ("<think>" if mode == "thinking" else "</think>")
            pieces = prompt.split(marker)[1:]
            for i, piece in enumerate(pieces):
                end = piece.find(enc.eos_token)
                if end < 0:
                    continue
                text = piece[:end + len(enc.eos_token)]
                cases.append((f"{name}_{mode}_{i}", text, mode))
    cases.append(("readme_parse", "Simple arithmetic.</think>2 + 2 = 4.<｜end▁of▁sentence｜>",
                  "thinking"))
    out = []
    for name, text, mode in cases:
        try:
            parsed = enc.parse_message_from_completion_text(text, thinking_mode=mode)
        except (ValueError, AssertionError) as err:
            print(f"skip {name}: {err}", file=sys.stderr)
            continue
        out.append({"name": name, "completion": text, "thinking_mode": mode,
                    "expected": {"reasoning_content": parsed["reasoning_content"],
                                 "content": parsed["content"],
                                 "tool_calls": [{"name": c["function"]["name"],
                                                 "arguments": c["function"]["arguments"]}
                                                for c in parsed["tool_calls"]]}})
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    enc = load_encoder(sys.argv[1])
    goldens = []
    for name, messages, opts in ENCODER_CASES:
        goldens.append({"name": name, "messages": messages, "options": opts,
                        "expected": encode(enc, messages, opts)})
    with open(os.path.join(HERE, "encoder_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(HERE, "parse_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(completions(enc), f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(goldens)} encoder cases written")


if __name__ == "__main__":
    main()
