"""A fewshot classifier as a Hugging Face model: the trained encoder, the pooling it was trained with
(``cls``: the first token's hidden state; ``mean`` / ``max``: the mean / maximum over the non-padded
tokens) and a linear
head, optionally on the L2-normalised sentence vector (the logistic-regression head of ``--head
logreg`` / ``--objective probe``).

:mod:`fewshot.export` copies this file, unchanged, into every exported ``model/`` folder as
``modeling_fewshot.py`` and names its classes in ``config.json``'s ``auto_map``, so the folder loads in
transformers' own tools without this package:

    from transformers import pipeline
    clf = pipeline("text-classification", model="runs/fewshot/model", trust_remote_code=True, truncation=True)
    clf(["a great film", "a dull plot"], top_k=None)

``trust_remote_code=True`` is needed because the stock ``*ForSequenceClassification`` classes cannot
express what the run trained: BERT's head reads its pooler (dense + tanh over ``[CLS]``) and RoBERTa's a
dense + tanh layer, where fewshot reads the first token's hidden state (or the mean over tokens)
directly. The config's ``model_type`` is this file's own (``fewshot_classifier``), so a load without
``trust_remote_code=True`` fails loudly instead of building a stock head with random weights.

Self-contained on purpose (torch and transformers only): it runs where fewshot is not installed.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

POOLINGS = ("cls", "mean", "max")


class FewShotClassifierConfig(PretrainedConfig):
    """``encoder_config``: the encoder's own config (``config.to_dict()``, with its ``model_type``);
    ``pooling``: ``cls``, ``mean`` or ``max``; ``normalize``: L2-normalise the sentence vector before the head;
    ``standardize``: subtract ``feature_mean`` and divide by ``feature_std`` (buffers saved with the weights)
    before the head (the PU pipeline's nnPU probe, fitted on standardised features);
    ``max_seq_length``: the tokens per text the run was trained and evaluated with (the saved tokenizer's
    ``model_max_length``; pass ``truncation=True`` to the pipeline to cut texts there, as fewshot does)."""

    model_type = "fewshot_classifier"

    def __init__(self, encoder_config: dict | None = None, pooling: str = "cls", normalize: bool = False,
                 standardize: bool = False, max_seq_length: int | None = None, classifier_dropout: float = 0.1,
                 **kwargs):
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.encoder_config = dict(encoder_config or {})
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.standardize = bool(standardize)
        self.max_seq_length = max_seq_length
        self.classifier_dropout = classifier_dropout
        super().__init__(**kwargs)


def encoder_config_of(config: FewShotClassifierConfig):
    """The encoder's config object (``AutoConfig.for_model`` of the saved dictionary)."""
    cfg = dict(config.encoder_config)
    if "model_type" not in cfg:
        raise ValueError("the fewshot classifier's config.json lacks encoder_config.model_type")
    return AutoConfig.for_model(**cfg)


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """The sentence vector, exactly as ``fewshot.model.FewShotModel.embed`` computes it."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "max":  # sentence-transformers' max pooling: padded positions never win
        return hidden.masked_fill(attention_mask.unsqueeze(-1) == 0, torch.finfo(hidden.dtype).min).max(1).values
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class FewShotForSequenceClassification(PreTrainedModel):
    """Encoder + pooling (+ L2 normalisation) + ``nn.Linear(hidden, num_labels)``."""

    config_class = FewShotClassifierConfig
    base_model_prefix = "encoder"
    main_input_name = "input_ids"

    def __init__(self, config: FewShotClassifierConfig):
        super().__init__(config)
        enc = encoder_config_of(config)
        # the dtype the caller asked for (from_pretrained(..., dtype=...) makes it the default while the model is
        # built), not the one the saved encoder_config names (float32: a bf16 load would mix dtypes in the head)
        self.encoder = AutoModel.from_config(enc, dtype=torch.get_default_dtype())
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(enc.hidden_size, config.num_labels)
        if config.standardize:
            self.register_buffer("feature_mean", torch.zeros(enc.hidden_size))
            self.register_buffer("feature_std", torch.ones(enc.hidden_size))
        self.post_init()

    def _init_weights(self, module):
        if module is getattr(self, "classifier", None):
            nn.init.normal_(module.weight, std=0.02)
            nn.init.zeros_(module.bias)

    def get_input_embeddings(self):
        return self.encoder.get_input_embeddings()

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The sentence vector the head reads (normalised / standardised as the config says)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        # only ids and mask, as fewshot trained it (token_type_ids of one text are zeros anyway)
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        h = pool(hidden, attention_mask, self.config.pooling)
        if self.config.normalize:
            h = h / h.norm(dim=-1, keepdim=True).clamp(min=1e-12)
        if self.config.standardize:
            h = (h - self.feature_mean) / self.feature_std
        return h

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, return_dict: bool | None = None, **kwargs):
        logits = self.classifier(self.dropout(self.embed(input_ids, attention_mask)))
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        if return_dict is False:
            return (logits,) if loss is None else (loss, logits)
        return SequenceClassifierOutput(loss=loss, logits=logits)
