#!/usr/bin/env python3
"""An advisor node: reads {"node", "input", ...} on stdin and prints its advice.

Its behaviour comes from ADVISOR_MODE so one program can play three advisors:
`style` advises, `broken` fails (exit 1), `slow` takes longer than the advisors' limit.
"""
import json
import os
import sys
import time

message = json.load(sys.stdin)
draft = message["input"]["draft"]["text"]
mode = os.environ.get("ADVISOR_MODE", "style")
if mode == "broken":
    print("the style guide service is down", file=sys.stderr)
    sys.exit(1)
if mode == "slow":
    time.sleep(30)
words = len(draft.split())
advice = {"verdict": "shorten" if words > 12 else "fine", "words": words}
json.dump({"review": advice, "$usage": {"input_tokens": words}}, sys.stdout)
