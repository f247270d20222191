"""Parse a Prometheus text exposition from stdin and print it as JSON (tests/e2e/ops.rs).

Usage: parse_metrics.py [--openmetrics] < exposition
Uses prometheus-client's own parser (`prometheus_client.parser.text_string_to_metric_families`,
the Prometheus text format 0.0.4), so what passes here is what a Prometheus client library
accepts; with --openmetrics (for a body served as `application/openmetrics-text`) its
OpenMetrics parser instead. Output, one JSON array on stdout:
    [{"name", "type", "samples": [{"name", "labels", "value"}]}]
Note the parser's convention: a counter family is named without its `_total` suffix while its
samples keep it (family `agui_gateway_runs`, sample `agui_gateway_runs_total`). Values are
numbers; +Inf/-Inf/NaN are given as the strings "+Inf", "-Inf", "NaN".
Any parse error exits non-zero with the error on stderr.
"""

import json
import math
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as prometheus_text


def number(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return v


def main():
    parse = openmetrics if sys.argv[1:] == ["--openmetrics"] else prometheus_text
    if sys.argv[1:] not in ([], ["--openmetrics"]):
        sys.exit("usage: parse_metrics.py [--openmetrics] < exposition")
    text = sys.stdin.read()
    try:
        families = [
            {
                "name": f.name,
                "type": f.type,
                "samples": [
                    {"name": s.name, "labels": dict(s.labels), "value": number(s.value)}
                    for s in f.samples
                ],
            }
            for f in parse(text)
        ]
    except Exception as e:  # the parser raises ValueError and friends on bad input
        print(f"not a valid Prometheus text exposition: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
    json.dump(families, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
