#!/usr/bin/env python3
"""An exec supervisor policy: reads {"supervisor", "depth", "allow", "state"} on stdin and
prints one routing decision: a bare node id (legacy form) or a typed decision."""
import json
import sys

message = json.load(sys.stdin)
state = message["state"]
if "summary" not in state or state["summary"] is None:
    print(json.dumps("summarize"))
else:
    print(json.dumps({"stop_global": {"reason": "summary written"}}))
