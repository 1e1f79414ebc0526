"""models.py — the model zoo: one small model of every torchvision classification family and
hand-written language models (GPT-2-, LLaMA- and BERT-style), for tests/zoo/zoo_test.py.

Each entry of MODELS is a Spec: the family, a builder returning the torch module, its inputs
(name, shape, dtype, range) and notes. Sizes are cut down (batch 2, 32x32 to 64x64 images where
the architecture allows, 64x64 for the networks with BatchNorm (107x107 for Inception-v3) so that their last stage is at least
2x2, narrow widths, few blocks) so that a model exports, compiles and trains
in seconds; the architecture of each family (its block types, normalizations, activations,
attention, pooling) is kept. Where torchvision's constructor fixes a size the export needs cut
(AlexNet's and VGG's 4096-wide classifiers, their adaptive pools that PyTorch 1.13 exports only
when the input size is a multiple of the output size), the notes say what was changed.

Stochastic depth (convnext, efficientnet, swin, maxvit) is on (probability 0.1): the export helper
writes it as ONNX Bernoulli; the comparisons with PyTorch run with dropout and stochastic depth off
on both sides (ckptc --disable-dropout makes Bernoulli return p, so the block is the identity).
"""
from dataclasses import dataclass, field
from typing import Callable, List, Tuple


@dataclass
class Input:
    name: str
    shape: Tuple[int, ...]
    dtype: str = "float32"  # or "int64", or "mask": int64 1/0, the second sample's last quarter 0 (padding)
    high: int = 0  # int64 inputs: values in [0, high)


@dataclass
class Spec:
    name: str
    family: str
    build: Callable
    inputs: List[Input]
    classes: int = 10
    label_shape: Tuple[int, ...] = (2,)  # the cross-entropy labels: the logits' shape less the class axis
    seed: int = 7  # of the inputs and labels
    bn: bool = False  # has BatchNorm: float32 on a batch of 2 is itself off by up to 1e-2
    notes: str = ""
    tags: List[str] = field(default_factory=list)


IMG = lambda hw=32: [Input("x", (2, 3, hw, hw))]  # noqa: E731


def _tv():
    import torchvision
    return torchvision.models


def alexnet():
    import torch.nn as nn
    m = _tv().alexnet(num_classes=10)
    # the 9216 -> 4096 -> 4096 classifier is 54M parameters: narrowed to 64, same layers
    m.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(256 * 6 * 6, 64), nn.ReLU(inplace=True), nn.Dropout(0.5),
                                 nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 10))
    return m


def vgg():
    import torch.nn as nn
    from torchvision.models.vgg import VGG, make_layers
    cfg = [8, "M", 16, "M", 32, 32, "M", 32, 32, "M", 32, 32, "M"]  # VGG-11 at 1/8 the width
    m = VGG(make_layers(cfg, batch_norm=False), num_classes=10)
    m.classifier = nn.Sequential(nn.Linear(32 * 7 * 7, 64), nn.ReLU(True), nn.Dropout(), nn.Linear(64, 64), nn.ReLU(True),
                                 nn.Dropout(), nn.Linear(64, 10))
    return m


def convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    return ConvNeXt([CNBlockConfig(16, 32, 2), CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)],
                    stochastic_depth_prob=0.1, num_classes=10)


def densenet():
    from torchvision.models.densenet import DenseNet
    return DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, num_classes=10)


def efficientnet():
    from torchvision.models.efficientnet import _efficientnet_conf, EfficientNet
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.34)
    return EfficientNet(setting, dropout=0.2, stochastic_depth_prob=0.1, num_classes=10, last_channel=last)


def efficientnet_v2():
    from torchvision.models.efficientnet import _efficientnet_conf, EfficientNet
    setting, last = _efficientnet_conf("efficientnet_v2_s")
    for s in setting:  # a quarter of the width, one layer per stage
        s.input_channels, s.out_channels, s.num_layers = max(8, s.input_channels // 4), max(8, s.out_channels // 4), 1
    return EfficientNet(setting, dropout=0.2, stochastic_depth_prob=0.1, num_classes=10, last_channel=128)


def googlenet():
    return _tv().googlenet(num_classes=10, aux_logits=False, init_weights=True)


def inception_v3():
    return _tv().inception_v3(num_classes=10, aux_logits=False, init_weights=True)


def maxvit():
    from torchvision.models.maxvit import MaxVit
    return MaxVit(input_size=(64, 64), stem_channels=16, partition_size=2, block_channels=[16, 32], block_layers=[1, 1],
                  head_dim=8, stochastic_depth_prob=0.1, num_classes=10)


def swin():
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                           stochastic_depth_prob=0.1, num_classes=10)


def swin_v2():
    from torchvision.models.swin_transformer import PatchMergingV2, SwinTransformer, SwinTransformerBlockV2
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                           stochastic_depth_prob=0.1, num_classes=10, block=SwinTransformerBlockV2,
                           downsample_layer=PatchMergingV2)


def vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10)


def resnet():
    return _tv().resnet18(num_classes=10)


def resnext():
    from torchvision.models.resnet import Bottleneck, ResNet
    return ResNet(Bottleneck, [1, 1, 1, 1], groups=8, width_per_group=4, num_classes=10)


def wide_resnet():
    from torchvision.models.resnet import Bottleneck, ResNet
    return ResNet(Bottleneck, [1, 1, 1, 1], width_per_group=128, num_classes=10)


def resnet_gn():
    """torchvision's ResNet with GroupNorm (8 groups) in place of BatchNorm: ONNX exports GroupNorm as
    Reshape, InstanceNormalization over the groups, Reshape, Mul, Add"""
    import torch.nn as nn
    from torchvision.models.resnet import BasicBlock, ResNet
    return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10, norm_layer=lambda c: nn.GroupNorm(8, c))


def instancenorm():
    """a small conv net with InstanceNorm2d (affine) between its convolutions, as style-transfer
    and GAN discriminators are built"""
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.InstanceNorm2d(16, affine=True), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.InstanceNorm2d(32, affine=True), nn.ReLU(),
                                      nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.InstanceNorm2d(32, affine=True), nn.ReLU())
            self.head = nn.Linear(32, 10)

        def forward(self, x):
            return self.head(self.body(x).mean((2, 3)))

    return Net()


def lraspp():
    """torchvision's LR-ASPP segmentation head on MobileNet-V3-Large: bilinear Resize of its
    logits to the input size; classes last for the cross-entropy over every pixel"""
    import torch.nn as nn

    class Seg(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = _tv().segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4)

        def forward(self, x):
            return self.m(x)["out"].permute(0, 2, 3, 1)

    return Seg()


def unet():
    """a small U-Net: GroupNorm conv blocks, max-pool down, nearest and bilinear (align_corners)
    Upsample up, skip connections by Concat; per-pixel classes last"""
    import torch
    import torch.nn as nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(4, o), nn.ReLU(), nn.Conv2d(o, o, 3, padding=1), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.mid = block(3, 8), block(8, 16), block(16, 32)
            self.up2 = nn.Upsample(scale_factor=2, mode="nearest")
            self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.u2, self.u1 = block(32 + 16, 16), block(16 + 8, 8)
            self.out = nn.Conv2d(8, 3, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(nn.functional.max_pool2d(a, 2))
            c = self.mid(nn.functional.max_pool2d(b, 2))
            b = self.u2(torch.cat([self.up2(c), b], 1))
            a = self.u1(torch.cat([self.up1(b), a], 1))
            return self.out(a).permute(0, 2, 3, 1)

    return UNet()


def convtranspose():
    """an encoder-decoder whose decoder is ConvTranspose2d: DCGAN's (4, stride 2, pad 1), a grouped
    one with output_padding, and a dilated one; per-pixel classes last"""
    import torch.nn as nn

    class EncDec(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
            self.dec = nn.Sequential(nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.GroupNorm(4, 16), nn.ReLU(),
                                     nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1, groups=2), nn.ReLU(),
                                     nn.ConvTranspose2d(8, 3, 3, padding=2, dilation=2))

        def forward(self, x):
            return self.dec(self.enc(x)).permute(0, 2, 3, 1)

    return EncDec()


def _tv_plain(fn, **kw):
    return lambda: getattr(_tv(), fn)(num_classes=10, **kw)


MODELS = [
    Spec("alexnet", "alexnet", alexnet, IMG(224), notes="224x224 (its pools need 6x6 features); classifier 64 wide"),
    Spec("convnext", "convnext", convnext, IMG(32), notes="3 stages of 2 blocks, 16-64 channels"),
    Spec("densenet", "densenet", densenet, IMG(64), bn=True, notes="growth 8, blocks (2,2,2,2)"),
    Spec("efficientnet", "efficientnet", efficientnet, IMG(64), bn=True, notes="b0 at width 0.25, depth 0.34"),
    Spec("efficientnet_v2", "efficientnet_v2", efficientnet_v2, IMG(64), bn=True, notes="v2-s stages at 1/4 width, 1 layer each"),
    Spec("googlenet", "googlenet", googlenet, IMG(64), bn=True, notes="torchvision's googlenet, no aux heads"),
    Spec("inception_v3", "inception_v3", inception_v3, IMG(107), bn=True,
         notes="torchvision's inception_v3 at 107x107 (its last stage 2x2), no aux head"),
    Spec("maxvit", "maxvit", maxvit, IMG(64), bn=True, notes="2 stages of 1 block, partition 2, 16-32 channels"),
    Spec("mnasnet", "mnasnet", _tv_plain("mnasnet0_5"), IMG(64), bn=True, notes="mnasnet0_5"),
    Spec("mobilenet_v2", "mobilenet_v2", _tv_plain("mobilenet_v2", width_mult=0.25), IMG(64), bn=True, notes="width 0.25"),
    Spec("mobilenet_v3", "mobilenet_v3", _tv_plain("mobilenet_v3_small"), IMG(64), bn=True, notes="mobilenet_v3_small"),
    Spec("regnet", "regnet", _tv_plain("regnet_x_400mf"), IMG(64), bn=True, notes="regnet_x_400mf"),
    Spec("resnet", "resnet", resnet, IMG(64), bn=True, notes="resnet18"),
    Spec("resnet_gn", "resnet (GroupNorm)", resnet_gn, IMG(32), notes="basic blocks [1,1,1,1], GroupNorm(8) for BatchNorm"),
    Spec("instancenorm", "InstanceNorm conv net", instancenorm, IMG(32), notes="3 convolutions, InstanceNorm2d (affine), 16-32 channels"),
    Spec("lraspp", "segmentation (LR-ASPP)", lraspp, IMG(64), classes=4, label_shape=(2, 64, 64), bn=True,
         notes="lraspp_mobilenet_v3_large, 4 classes, 64x64, bilinear Resize to the input"),
    Spec("unet", "U-Net", unet, IMG(32), classes=3, label_shape=(2, 32, 32),
         notes="2 levels, 8-32 channels, GroupNorm, nearest and bilinear (align_corners) Upsample"),
    Spec("convtranspose", "ConvTranspose decoder", convtranspose, IMG(32), classes=3, label_shape=(2, 32, 32),
         notes="2 strided convolutions, 3 ConvTranspose2d (4/2/1; grouped, output_padding 1; dilation 2)"),
    Spec("resnext", "resnext", resnext, IMG(64), bn=True, notes="bottleneck [1,1,1,1], 8 groups x 4"),
    Spec("wide_resnet", "wide_resnet", wide_resnet, IMG(64), bn=True, notes="bottleneck [1,1,1,1], width 128"),
    Spec("shufflenet", "shufflenet", _tv_plain("shufflenet_v2_x0_5"), IMG(64), bn=True, notes="shufflenet_v2_x0_5"),
    Spec("squeezenet", "squeezenet", _tv_plain("squeezenet1_1"), IMG(64), notes="squeezenet1_1 at 64x64"),
    Spec("swin", "swin", swin, IMG(32), notes="2 stages of 2 blocks, window 4, embed 16"),
    Spec("swin_v2", "swin_v2", swin_v2, IMG(32), notes="2 stages of 2 v2 blocks, window 4, embed 16"),
    Spec("vgg", "vgg", vgg, IMG(224), notes="VGG-11 at 1/8 width, 224x224 (its pool needs 7x7 features); classifier 64 wide"),
    Spec("vit", "vit", vit, IMG(32), notes="2 layers, patch 8, hidden 32"),
]


# ---------------------------------------------------------------- language models, written here

def _lm_classes():
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class GPT2Block(nn.Module):
        def __init__(self, d, heads, T):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.drop = nn.Dropout(0.1)
            self.heads = heads
            # nanoGPT's causal mask: a buffer, not a parameter
            self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = self.drop(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.drop(self.c_proj(y))
            return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))

    class GPT2(nn.Module):
        """GPT-2: learned positions, pre-LN blocks, tanh GELU, the head tied to the embedding."""

        def __init__(self, V=64, T=16, d=32, heads=4, L=2):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T, d)
            self.h = nn.ModuleList([GPT2Block(d, heads, T) for _ in range(L)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, V, bias=False)
            self.lm_head.weight = self.wte.weight
            self.register_buffer("pos", torch.arange(T))

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(self.pos[: idx.shape[1]])
            for b in self.h:
                x = b(x)
            return self.lm_head(self.ln_f(x))

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-5):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class LlamaBlock(nn.Module):
        def __init__(self, d, heads, kv_heads, T, hidden):
            super().__init__()
            self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
            self.attention_norm, self.ffn_norm = RMSNorm(d), RMSNorm(d)
            self.wq = nn.Linear(d, d, bias=False)
            self.wk = nn.Linear(d, kv_heads * self.hd, bias=False)
            self.wv = nn.Linear(d, kv_heads * self.hd, bias=False)
            self.wo = nn.Linear(d, d, bias=False)
            self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
            self.w2 = nn.Linear(hidden, d, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
            freqs = torch.outer(torch.arange(T).float(), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos()[None, None])  # RoPE tables: buffers
            self.register_buffer("sin_cached", emb.sin()[None, None])
            self.register_buffer("causal", torch.full((T, T), float("-inf")).triu(1))  # -inf above the diagonal

        def forward(self, x):
            B, T, C = x.shape
            h = self.attention_norm(x)
            q = self.wq(h).view(B, T, self.heads, self.hd).transpose(1, 2)
            k = self.wk(h).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
            v = self.wv(h).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
            cos, sin = self.cos_cached[:, :, :T], self.sin_cached[:, :, :T]
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            rep = self.heads // self.kv_heads  # grouped-query attention: each kv head serves rep heads
            k = k[:, :, None].expand(B, self.kv_heads, rep, T, self.hd).reshape(B, self.heads, T, self.hd)
            v = v[:, :, None].expand(B, self.kv_heads, rep, T, self.hd).reshape(B, self.heads, T, self.hd)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd) + self.causal[:T, :T]
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
            x = x + self.wo(y)
            h = self.ffn_norm(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    class Llama(nn.Module):
        """LLaMA: RMSNorm, rotary embeddings from cos/sin buffers, grouped-query attention with a
        -inf causal mask buffer, SwiGLU, no biases, an untied head."""

        def __init__(self, V=64, T=16, d=32, heads=4, kv_heads=2, L=2):
            super().__init__()
            self.tok_embeddings = nn.Embedding(V, d)
            self.layers = nn.ModuleList([LlamaBlock(d, heads, kv_heads, T, 64) for _ in range(L)])
            self.norm = RMSNorm(d)
            self.output = nn.Linear(d, V, bias=False)

        def forward(self, idx):
            x = self.tok_embeddings(idx)
            for layer in self.layers:
                x = layer(x)
            return self.output(self.norm(x))

    class BertLayer(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, heads, dropout=0.1, batch_first=True)
            self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.drop = nn.Dropout(0.1)

        def forward(self, x, add_mask):
            a, _ = self.attn(x, x, x, attn_mask=add_mask, need_weights=False)
            x = self.ln1(x + self.drop(a))  # post-LN, as BERT
            return self.ln2(x + self.drop(self.fc2(F.gelu(self.fc1(x)))))

    class Bert(nn.Module):
        """BERT: word, position and token-type embeddings, a padding mask from the input, post-LN
        encoder layers, a tanh pooler over [CLS], a sequence classifier."""

        def __init__(self, V=64, T=16, d=32, heads=4, L=2, classes=3):
            super().__init__()
            self.word, self.position, self.token_type = nn.Embedding(V, d), nn.Embedding(T, d), nn.Embedding(2, d)
            self.ln = nn.LayerNorm(d, eps=1e-12)
            self.layers = nn.ModuleList([BertLayer(d, heads) for _ in range(L)])
            self.pooler, self.classifier = nn.Linear(d, d), nn.Linear(d, classes)
            self.heads = heads
            self.register_buffer("position_ids", torch.arange(T)[None])

        def forward(self, idx, token_type, mask):
            B, T = idx.shape
            x = self.ln(self.word(idx) + self.position(self.position_ids[:, :T]) + self.token_type(token_type))
            # (B, T) 1/0 -> an additive (B * heads, T, T) mask: padded keys get -10000
            add = ((1.0 - mask.float()) * -10000.0)[:, None, None, :].expand(B, self.heads, T, T).reshape(B * self.heads, T, T)
            for layer in self.layers:
                x = layer(x, add)
            return self.classifier(torch.tanh(self.pooler(x[:, 0])))

    return GPT2, Llama, Bert


def gpt2():
    return _lm_classes()[0]()


def llama():
    return _lm_classes()[1]()


def bert():
    return _lm_classes()[2]()


TOKENS = [Input("idx", (2, 16), "int64", 64)]
MODELS += [
    Spec("gpt2", "GPT-2-style", gpt2, TOKENS, classes=64, label_shape=(2, 16), notes="2 blocks, d 32, 4 heads, T 16; causal-mask buffer; tied head",
         tags=["lm"]),
    Spec("llama", "LLaMA-style", llama, TOKENS, classes=64, label_shape=(2, 16),
         notes="2 blocks, d 32, 4 heads / 2 kv heads, T 16; RMSNorm, RoPE and -inf mask buffers, SwiGLU", tags=["lm"]),
    Spec("bert", "BERT-style", bert,
         [Input("idx", (2, 16), "int64", 64), Input("token_type", (2, 16), "int64", 2), Input("mask", (2, 16), "mask")],
         classes=3, notes="2 post-LN layers, d 32, 4 heads, T 16; padding mask input, token types; [CLS] classifier",
         tags=["lm"]),
]


def lstm():
    import torch.nn as nn

    class LSTMClassifier(nn.Module):
        """Embedding, a 2-layer batch-first LSTM (the second bidirectional), a Linear on the last step."""

        def __init__(self, V=64, d=16, hidden=24, classes=5):
            super().__init__()
            self.emb = nn.Embedding(V, d)
            self.lstm1 = nn.LSTM(d, hidden, batch_first=True)
            self.lstm2 = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(2 * hidden, classes)

        def forward(self, idx):
            h, _ = self.lstm1(self.emb(idx))
            h, _ = self.lstm2(h)
            return self.fc(h[:, -1])

    return LSTMClassifier()


MODELS.append(Spec("lstm", "LSTM classifier", lstm, [Input("idx", (2, 12), "int64", 64)], classes=5,
                   notes="embedding 16, LSTM 24 then bidirectional LSTM 24, T 12, last step", tags=["lm"]))
