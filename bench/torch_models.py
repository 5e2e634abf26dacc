"""PyTorch models of the families users bring in 2026, each built, briefly trained and written as the two files a user
would bring: LiteRT's converter's (litert-torch) float .tflite and PyTorch's ONNX export (which onnx2tf then converts, in
its own environment). Runs in the torch environment (`make setup-torch`: .venv/torch), not the project's;
bench/models_from_tools.py starts it and reads what it writes:

    .venv/torch/bin/python bench/torch_models.py --out DIR --images cifar.npz [--models m5,mobile,...]

For each model DIR/<name>.tflite, DIR/<name>.onnx and DIR/<name>.npz (calib, eval, eval_labels: the inputs in the
model's own layout, PyTorch's NCHW for images), and DIR/manifest.json: [{"name", "family", "files": {tool: path, or the
tool's refusal}, "arrays", "input", "classes"}]. Images are CIFAR-10's (an .npz
the bench writes); sequences and waveforms are
seeded synthetic classes (a sine of its own frequency per class, under noise)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

import litert_torch

from maker_arguments import maker_arguments  # bench/, beside this script

torch.manual_seed(0)
F = nn.functional


class M5(nn.Module):
    """M5 (Dai et al. 2017) in small, on a raw waveform: Conv1d with BatchNorm1d, max pools, a mean over time."""

    def __init__(self, classes: int = 4):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(1, 16, 40, stride=8, padding=16), nn.Conv1d(16, 32, 3, padding=1), nn.Conv1d(32, 32, 3, padding=1)])
        self.norms = nn.ModuleList([nn.BatchNorm1d(16), nn.BatchNorm1d(32), nn.BatchNorm1d(32)])
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        for conv, norm in zip(self.convs, self.norms):
            x = F.max_pool1d(F.relu(norm(conv(x))), 4)
        return self.head(x.mean(-1))


class MobileBlock(nn.Module):
    """MobileNetV3's inverted residual: 1x1 expand, hardswish, depthwise 3x3, a squeeze-excite gate (hardsigmoid), 1x1."""

    def __init__(self, channels: int, expanded: int, stride: int):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(channels, expanded, 1, bias=False), nn.BatchNorm2d(expanded), nn.Hardswish())
        self.depthwise = nn.Sequential(nn.Conv2d(expanded, expanded, 3, stride, 1, groups=expanded, bias=False), nn.BatchNorm2d(expanded),
                                       nn.Hardswish())
        self.squeeze, self.excite = nn.Conv2d(expanded, expanded // 4, 1), nn.Conv2d(expanded // 4, expanded, 1)
        self.project = nn.Sequential(nn.Conv2d(expanded, channels, 1, bias=False), nn.BatchNorm2d(channels))
        self.residual = stride == 1

    def forward(self, x):
        y = self.depthwise(self.expand(x))
        y = y * F.hardsigmoid(self.excite(F.relu(self.squeeze(y.mean((2, 3), keepdim=True)))))
        y = self.project(y)
        return x + y if self.residual else y


class Mobile(nn.Module):
    """A MobileNetV3-small-like network: stem, inverted residuals, a global average, a classifier."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.blocks = nn.Sequential(MobileBlock(16, 48, 1), MobileBlock(16, 64, 2), MobileBlock(16, 64, 1))
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class ResNet(nn.Module):
    """A ResNet-8-like network: BatchNorm2d, ReLU, residual sums with a strided 1x1 shortcut, adaptive average pool."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.body = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.Conv2d(32, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32))
        self.shortcut = nn.Conv2d(16, 32, 1, 2)
        self.pool, self.head = nn.AdaptiveAvgPool2d(1), nn.Linear(32, classes)

    def forward(self, x):
        x = self.stem(x)
        x = F.relu(self.body(x) + self.shortcut(x))
        return self.head(torch.flatten(self.pool(x), 1))


class ConvNeXtBlock(nn.Module):
    """ConvNeXt's block: depthwise 7x7, LayerNorm over the channels (permuted to channel-last), a GELU MLP, layer scale."""

    def __init__(self, channels: int):
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels)
        self.up, self.down = nn.Linear(channels, 4 * channels), nn.Linear(4 * channels, channels)
        self.scale = nn.Parameter(torch.full((channels,), 0.5))

    def forward(self, x):
        y = self.norm(self.depthwise(x).permute(0, 2, 3, 1))
        y = self.scale * self.down(F.gelu(self.up(y)))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, 24, 4, 4)
        self.blocks = nn.Sequential(ConvNeXtBlock(24), ConvNeXtBlock(24))
        self.norm, self.head = nn.LayerNorm(24), nn.Linear(24, classes)

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.stem(x)).mean((2, 3))))


class Mixer(nn.Module):
    """An MLP-Mixer-like network: patches as tokens, pre-norm token-wise MLPs with LayerNorm, a mean over the tokens."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.patches = nn.Conv2d(3, 32, 4, 4)
        self.norms = nn.ModuleList([nn.LayerNorm(32), nn.LayerNorm(32)])
        self.mlps = nn.ModuleList([nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32)) for _ in range(2)])
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        tokens = self.patches(x).flatten(2).transpose(1, 2)
        for norm, mlp in zip(self.norms, self.mlps):
            tokens = tokens + mlp(norm(tokens))
        return self.head(tokens.mean(1))


class Attention(nn.Module):
    """timm's ViT attention: one packed projection reshaped to [B, N, 3, heads, d], permuted to [3, B, heads, N, d] and
    unbound into q, k and v, F.scaled_dot_product_attention, the heads merged back and projected."""

    def __init__(self, channels: int, heads: int):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(channels, 3 * channels), nn.Linear(channels, channels)

    def forward(self, x):
        batch, length, channels = x.shape
        q, k, v = self.qkv(x).reshape(batch, length, 3, self.heads, channels // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch, length, channels))


class ViT(nn.Module):
    """A ViT as timm writes one: 4x4 patches by a strided conv, a class token and a position embedding, two pre-norm
    blocks of attention and a GELU MLP, the class token's row classified."""

    def __init__(self, classes: int = 10, channels: int = 32, heads: int = 4):
        super().__init__()
        self.patches = nn.Conv2d(3, channels, 4, 4)
        self.class_token, self.position = nn.Parameter(torch.zeros(1, 1, channels)), nn.Parameter(0.02 * torch.randn(1, 65, channels))
        self.norms = nn.ModuleList([nn.LayerNorm(channels) for _ in range(4)])
        self.attentions = nn.ModuleList([Attention(channels, heads) for _ in range(2)])
        self.mlps = nn.ModuleList([nn.Sequential(nn.Linear(channels, 2 * channels), nn.GELU(), nn.Linear(2 * channels, channels)) for _ in range(2)])
        self.norm, self.head = nn.LayerNorm(channels), nn.Linear(channels, classes)

    def forward(self, x):
        tokens = self.patches(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.class_token.expand(len(tokens), -1, -1), tokens], 1) + self.position
        for block in range(2):
            tokens = tokens + self.attentions[block](self.norms[2 * block](tokens))
            tokens = tokens + self.mlps[block](self.norms[2 * block + 1](tokens))
        return self.head(self.norm(tokens)[:, 0])


class PReLUNet(nn.Module):
    """A CNN of PReLU activations: one slope per channel (nn.PReLU(C)) after each conv, one in all after the pool."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.PReLU(16), nn.Conv2d(16, 32, 3, 2, 1),
                                      nn.BatchNorm2d(32), nn.PReLU(32), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.PReLU())
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.features(x))


class Flattened(nn.Module):
    """A classic CNN whose classifier reads the map flattened in PyTorch's channel-first order."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 16, 3, 2, 1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class Encoder(nn.Module):
    """nn.Embedding and nn.TransformerEncoderLayer on token ids, a mean over the tokens."""

    def __init__(self, vocabulary: int = 64, classes: int = 4):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, 32)
        self.encoder = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
        self.head = nn.Linear(32, classes)

    def forward(self, ids):
        return self.head(self.encoder(self.embedding(ids)).mean(1))


class Recurrent(nn.Module):
    """nn.LSTM over a sequence, its last output classified."""

    def __init__(self, classes: int = 4):
        super().__init__()
        self.lstm, self.head = nn.LSTM(8, 16, batch_first=True), nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


def cifar(images: Path, count: int) -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 images [N, 3, 32, 32] in [0, 1] and their labels, from the .npz bench/models_from_tools.py writes (the
    project's reader of the official format, core/data/datasets.py, refuses any pickle but arrays): its training batch,
    then its test batch."""
    with np.load(images) as arrays:
        return arrays["images"][:count].astype(np.float32), arrays["labels"][:count].astype(np.int64)


def sequences(count: int, length: int, channels: int, classes: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, count)
    time = np.arange(length)[None, :, None]
    phase = rng.uniform(0, 2 * np.pi, (count, 1, channels))
    values = np.sin(2 * np.pi * (2 + 3 * labels)[:, None, None] / length * time + phase) + 0.3 * rng.normal(size=(count, length, channels))
    return values.astype(np.float32), labels


def tokens(count: int, length: int = 12, vocabulary: int = 64, classes: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Class c: ids drawn mostly from its own quarter of the vocabulary."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, count)
    own = labels[:, None] * (vocabulary // classes) + rng.integers(0, vocabulary // classes, (count, length))
    ids = np.where(rng.uniform(size=(count, length)) < 0.7, own, rng.integers(0, vocabulary, (count, length)))
    return ids.astype(np.int64), labels


# name -> (family, the model, its data: count -> (inputs, labels))
MODELS = {
    "m5": ("raw audio, Conv1d + BatchNorm1d", M5, lambda n, images: (lambda x: (x[0].transpose(0, 2, 1)[:, :1], x[1]))(sequences(n, 1600, 1))),
    "mobile": ("MobileNetV3-like (hardswish, SE, depthwise)", Mobile, lambda n, images: cifar(images, n)),
    "resnet": ("ResNet-8-like (BatchNorm2d, residual)", ResNet, lambda n, images: cifar(images, n)),
    "convnext": ("ConvNeXt-like (depthwise 7x7, LayerNorm, GELU)", ConvNeXt, lambda n, images: cifar(images, n)),
    "mixer": ("MLP-Mixer-like (tokens, LayerNorm, GELU)", Mixer, lambda n, images: cifar(images, n)),
    "flattened": ("CNN, classifier on the NCHW flatten", Flattened, lambda n, images: cifar(images, n)),
    "prelu": ("CNN of nn.PReLU (per channel, one in all)", PReLUNet, lambda n, images: cifar(images, n)),
    "vit": ("ViT as timm writes it (class token, packed q, k, v)", ViT, lambda n, images: cifar(images, n)),
    "encoder": ("nn.Embedding + nn.TransformerEncoderLayer", Encoder, lambda n, images: tokens(n)),
    "lstm": ("nn.LSTM", Recurrent, lambda n, images: sequences(n, 10, 8)),
}


def trained(model: nn.Module, inputs: np.ndarray, labels: np.ndarray, epochs: int) -> nn.Module:
    optimizer = torch.optim.Adam(model.parameters(), 3e-3)
    x, y = torch.from_numpy(inputs), torch.from_numpy(labels)
    model.train()
    for _ in range(epochs):
        for start in range(0, len(x), 32):
            optimizer.zero_grad()
            F.cross_entropy(model(x[start:start + 32]), y[start:start + 32]).backward()
            optimizer.step()
    return model.eval()


def litert_torch_file(model: nn.Module, sample: torch.Tensor, path: Path) -> None:
    litert_torch.convert(model, (sample,)).export(str(path))


def onnx_file(model: nn.Module, sample: torch.Tensor, path: Path) -> None:
    """PyTorch's TorchScript exporter, as onnx2tf's own examples export (the dynamo exporter needs onnxscript), at opset
    20, the first with a Gelu operator: at 17 an exact GELU is an Erf, which onnx2tf writes as a TensorFlow (Flex) op."""
    torch.onnx.export(model, (sample,), str(path), dynamo=False, opset_version=20, input_names=["input"], output_names=["logits"])


# tool -> (the file's suffix, how it is written)
EXPORTS = {"litert-torch": (".tflite", litert_torch_file), "onnx2tf": (".onnx", onnx_file)}


def written(export, model: nn.Module, sample: torch.Tensor, path: Path) -> str:
    """The file's path, or the exporter's refusal (a result of the benchmark, not its crash)."""
    try:
        export(model, sample, path)
    except Exception as error:
        return f"refused: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
    return str(path)


def main() -> None:
    arguments = maker_arguments(__doc__, list(MODELS))
    manifest = []
    for name in arguments.models.split(","):
        family, build, data = MODELS[name]
        inputs, labels = data(arguments.train + 512, arguments.images)
        model = trained(build(), inputs[:arguments.train], labels[:arguments.train], arguments.epochs)
        held = inputs[arguments.train:]
        sample = torch.from_numpy(held[:1])
        files = {tool: written(export, model, sample, arguments.out / f"{name}{suffix}") for tool, (suffix, export) in EXPORTS.items()}
        stored = held.astype(np.int32) if held.dtype.kind == "i" else held
        np.savez(arrays := arguments.out / f"{name}.npz", calib=stored[:256], eval=stored[256:], eval_labels=labels[arguments.train + 256:])
        manifest.append({"name": name, "family": family, "files": files, "arrays": str(arrays), "input": list(held.shape[1:]),
                         "classes": int(labels.max()) + 1})
        print(f"{name}: {files}", file=sys.stderr)
    (arguments.out / "manifest.json").write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
