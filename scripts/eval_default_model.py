#!/usr/bin/env python3
"""Word error rate of a model run by steno's C engine on the default model's
held-out set (scripts/default_model_data.py eval-set DIR: WAV files + index.tsv).

    python scripts/default_model_data.py eval-set build/heldout --n 300
    python scripts/eval_default_model.py build-x/steno models/steno-en-tiny-ctc.gguf build/heldout

One `steno run` call transcribes every clip (--json -o into a scratch folder);
the WER is jiwer's, over all words. Prints the worst sentences and the total.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("steno", type=Path)
    p.add_argument("model", type=Path)
    p.add_argument("eval_dir", type=Path)
    p.add_argument("--show", type=int, default=10, help="worst sentences to print")
    a = p.parse_args(argv)
    import jiwer
    rows = [line.rstrip("\n").split("\t") for line in (a.eval_dir / "index.tsv").read_text().splitlines()]
    with tempfile.TemporaryDirectory() as out:
        t0 = time.time()
        r = subprocess.run([str(a.steno), "run", str(a.model), *[str(a.eval_dir / f) for f, _, _ in rows],
                            "--json", "-o", out, "--quiet"], capture_output=True, text=True)
        seconds = time.time() - t0
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1
        hyps = [json.loads((Path(out) / (Path(f).stem + ".json")).read_text())["text"] for f, _, _ in rows]
    refs = [t for _, _, t in rows]
    per = sorted(((jiwer.wer(r_, h), r_, h, v) for r_, h, (_, v, _) in zip(refs, hyps, rows)), reverse=True)
    for w, r_, h, v in per[:a.show]:
        print(f"{w:.2f}  [{v}]\n      ref: {r_}\n      hyp: {h}")
    total = jiwer.wer(refs, hyps)
    words = sum(len(t.split()) for t in refs)
    print(json.dumps(dict(model=str(a.model), sentences=len(refs), words=words, wer=round(total, 4),
                          exact_sentences=sum(r_ == h for r_, h in zip(refs, hyps)), seconds=round(seconds, 1))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
