#!/usr/bin/env python3
"""A team member: reads {"node", "input": {..., "team": {"me", "turn", "inbox",
"final_turn"}}, ...} on stdin and prints `$broadcast` (and `$exit` to leave).

Its behaviour comes from MEMBER_ROLE so one program plays both members of
`team_review.json`: the `critic` objects on its first turn and answers the lead's
question on its second; the `editor` suggests a fix once and leaves (`$exit`).
"""
import json
import os
import sys

message = json.load(sys.stdin)
draft = message["input"]["draft"]["text"]
team = message["input"]["team"]
role = os.environ.get("MEMBER_ROLE", "critic")
heard = [b["message"] for b in team["inbox"] if b["type"] == "lead"]
out = {"$usage": {"input_tokens": len(draft.split()) + len(team["inbox"]), "output_tokens": 8}}
if role == "editor":
    out["$broadcast"] = "Suggest: replace 'next week' with a date."
    out["$exit"] = True
elif team["turn"] == 1:
    out["$broadcast"] = "Objection: '%s' promises no date." % draft
else:
    answer = "yes" if heard else "no question heard"
    out["$broadcast"] = "Answer to the lead: %s, a date settles my objection." % answer
    out["$exit"] = team["final_turn"]
json.dump(out, sys.stdout)
