"""Renders deploy/helm/agui-a2a-gateway offline with helm-python-sdk (the Helm 4 SDK, no
cluster: `lookup` finds nothing, so the API key Secret is generated anew on every render).

    render.py VALUES.yaml     the rendered objects of that values file as one JSON list
                              (tests/e2e/helm.rs reads it)
    render.py --update        rewrite tests/helm/golden/ from tests/helm/values/
    render.py --check         exit 1 when a golden file differs (scripts/helm-golden)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy/helm/agui-a2a-gateway"
VALUES = ROOT / "tests/helm/values"
GOLDEN = ROOT / "tests/helm/golden"
RELEASE = "gw"
NAMESPACE = "gateway"
# The generated API key is random on every offline render: golden files show this instead.
MASK = "<generated: 48 random characters, base64>"


def load_values(path: Path) -> dict:
    return helm.values_from_yaml(path.read_text()) or {}


def render(values: dict | None = None) -> dict[str, str]:
    """Template path -> rendered text (NOTES.txt included), as `helm template` would."""
    chart = helm.Chart.load(CHART)
    chart.validate_schema(values)
    return chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)


def objects(rendered: dict[str, str]) -> list[dict]:
    """Every Kubernetes object rendered, in template order."""
    out = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        out.extend(d for d in yaml.safe_load_all(rendered[path]) if d)
    return out


def masked(text: str) -> str:
    return re.sub(r'(?m)^(  api-key: )".*"$', rf'\1"{MASK}"', text)


def golden_text(rendered: dict[str, str]) -> str:
    parts = []
    for path in sorted(rendered):
        body = rendered[path].strip()
        if body and body != "---":
            parts.append(f"# Source: {path}\n{masked(body)}\n")
    return "\n".join(parts)


def values_files() -> list[Path]:
    return sorted(VALUES.glob("*.yaml"))


def goldens(update: bool) -> int:
    stale = []
    for values in values_files():
        want = golden_text(render(load_values(values)))
        golden = GOLDEN / values.name
        if update:
            GOLDEN.mkdir(exist_ok=True)
            golden.write_text(want)
        elif not golden.exists() or golden.read_text() != want:
            stale.append(golden.relative_to(ROOT))
    if update:
        known = {v.name for v in values_files()}
        for extra in GOLDEN.glob("*.yaml"):
            if extra.name not in known:
                extra.unlink()
        print(f"wrote {len(values_files())} golden files in {GOLDEN.relative_to(ROOT)}")
    for path in stale:
        print(f"differs: {path} (scripts/helm-golden --update rewrites it; review the diff)")
    return 1 if stale else 0


def main(argv: list[str]) -> int:
    if argv == ["--update"]:
        return goldens(update=True)
    if argv == ["--check"]:
        return goldens(update=False)
    if len(argv) == 1 and not argv[0].startswith("-"):
        print(json.dumps(objects(render(load_values(Path(argv[0]))))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
