#!/usr/bin/python3
"""Reads a Prometheus text exposition with the reference client's parser
(python3-prometheus-client) and prints what it understood as JSON:
{family: {"type", "help", "samples": [[name, labels, value], ...]}}.
A text the parser rejects exits 1 with its error.

    prometheus_parse.py FILE
"""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

try:
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    out = {}
    for fam in text_string_to_metric_families(text):
        out[fam.name] = {"type": fam.type, "help": fam.documentation,
                         "samples": [[s.name, s.labels, s.value] for s in fam.samples]}
except Exception as e:  # the parser's own error, whatever its class
    print(f"parse error: {e}", file=sys.stderr)
    sys.exit(1)
json.dump(out, sys.stdout)
