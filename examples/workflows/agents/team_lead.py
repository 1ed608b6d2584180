#!/usr/bin/env python3
"""The lead of `team_review.json`: reads the cycle's broadcasts in `team.inbox` and
either asks the members a question (`$broadcast`, a next cycle) or decides (`$final`
with its `decision` write). It must decide when `team.final_turn` is true.
"""
import json
import sys

message = json.load(sys.stdin)
team = message["input"]["team"]
inbox = team["inbox"]
usage = {"input_tokens": sum(len(json.dumps(b)) for b in inbox) // 4, "output_tokens": 12}
if team["turn"] == 1 and not team["final_turn"]:
    json.dump({"$broadcast": "critic: would a fixed date settle it?", "$usage": usage}, sys.stdout)
else:
    notes = [b["from"] + ": " + str(b["message"]) for b in inbox]
    decision = {"verdict": "approve with a date", "notes": notes}
    json.dump({"$final": True, "decision": decision, "$usage": usage}, sys.stdout)
