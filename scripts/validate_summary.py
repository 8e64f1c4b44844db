"""Merge the probe documents of scripts/validate_gpu.sh into results.json and summary.txt."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

EXPECTED = {
    "normal": ("gpu", None),
    "no_compiler": ("cpu-fallback", "no_c_compiler"),
    "cc_invalid": ("cpu-fallback", "cc_env_invalid"),
    "warm_no_compiler": ("gpu", "stale_cache_masks_compiler"),
    "deep": ("gpu", None),
    "fla": ("gpu", None),
    "fla_no_compiler": ("cpu-fallback", "no_c_compiler"),
}


def main(json_dir: str, walls: str, out: str) -> None:
    results: dict[str, object] = {}
    lines = []
    for name, (verdict, cause) in EXPECTED.items():
        path = Path(json_dir) / f"{name}.json"
        if not path.exists():
            continue
        rc = (Path(json_dir) / f"{name}.rc").read_text().strip()
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            results[name] = {"error": str(exc), "raw": path.read_text()[:4000]}
            lines.append(f"{name}: NOT JSON ({exc}) {rc}")
            continue
        results[name] = doc
        got = (doc["triton"]["verdict"], doc["triton"]["cause"])
        mark = "OK " if got == (verdict, cause) else "BAD"
        lines.append(f"{mark} {name}: {rc} status={doc['status']} verdict={got[0]} "
                     f"cause={got[1]} (expected {verdict}/{cause}) duration_s={doc['duration_s']}"
                     f"\n    reason: {doc['reason']}\n    fix: {doc['triton']['fix']}")
        for check in doc["checks"]:
            if check["status"] != "pass":
                lines.append(f"    {check['id']}: {check['status']}: {check['summary']}")
    lines.append(Path(walls).read_text())
    timings: dict[str, list[float]] = {}
    for line in (Path(out) / "timings.txt").read_text().splitlines():
        label, value = line.split()
        timings.setdefault(label, []).append(float(value))
    for label, values in timings.items():
        lines.append(f"{label}: median {statistics.median(values):.2f} s of {values}")
    if "bare_target" in timings and "probe_default" in timings:
        ratio = statistics.median(timings["probe_default"]) / statistics.median(
            timings["bare_target"])
        lines.append(f"probe_default / bare_target = {ratio:.2f}")
    if "bare_kernel" in timings and "probe_deep" in timings:
        ratio = statistics.median(timings["probe_deep"]) / statistics.median(
            timings["bare_kernel"])
        lines.append(f"probe_deep / bare_kernel = {ratio:.2f}")
    (Path(out) / "results.json").write_text(json.dumps(results, indent=1))
    (Path(out) / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(*sys.argv[1:4])
