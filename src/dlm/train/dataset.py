"""Training examples cut from tokenized rows, read lazily.

Both layouts start from the same examples, computed with NumPy over row lengths (no
per-row Python loop): a row of `L` tokens becomes windows of at most `sequence_len`
tokens that overlap by one token (stride `sequence_len - 1`). A causal LM predicts every
position of a window but the first from what precedes it, so the overlap makes every
token of a row after its first a prediction target exactly once: a long file keeps its
tail, and no token is lost at a window boundary. Then:

- packing (`training.packing: true`, the default): the examples are packed into blocks
  of at most `sequence_len` tokens by best-fit decreasing (`pack_blocks`), each block
  carrying `position_ids` that restart at 0 where an example starts. transformers reads
  those restarts as separate sequences when no `attention_mask` is given
  (`masking_utils.find_packed_sequence_indices`) and builds a block-diagonal causal mask,
  so no token attends across examples, and each example is scored exactly as it would
  be alone: the first token of each example carries no loss (nothing of its own
  precedes it). Short rows and Q/A pairs fill blocks instead of padding a batch to its
  longest example; a full-length window is a block of its own.
- windows (`packing: false`): one example per window; a batch is padded to its longest.

An example is `{"input_ids": 1-D int64 [n], "labels": 1-D int64 [n]}`, packed blocks add
`"position_ids": 1-D int64 [n]`. `labels` equals `input_ids` except on an instruction
row's prompt tokens and an example's first token, where it is -100 (no loss), the
convention of Hugging Face causal-LM models.
Ids are widened from the stored uint16/uint32 to int64 here, one example at a time.
Examples with no predicted loss token (a window wholly inside a prompt) are dropped.

Instruction share (`training.instruction_share: f`): a document that teaches a few
Q/A pairs next to a large source tree would otherwise see them about once per epoch
among tens of thousands of windows. With a share set, every instruction example is
repeated `r` times, `r = max(1, round(f * n_other / ((1 - f) * n_instruction)))`, so
instruction examples make up about `f` of the examples drawn (of the tokens, with
packing). With packing, instruction examples are packed into blocks of their own and
those blocks are repeated, so the `r` copies of one pair land in `r` different blocks
that the trainer's shuffle spreads over the run, never `r` times in one micro-batch.
Replay (`replay_share: f`, `dlm.rows.replay`): the base model's answers to general
questions are drawn to make up about `f` of all examples (of the tokens, with packing,
in blocks of their own), each replay example `k` or `k + 1` times (`replay_draws`);
instruction repeats are computed over the document's examples alone.
The repeats sit in the index arrays only; no ids are copied, and the order is a pure
function of the rows, so runs stay deterministic.
"""

from __future__ import annotations

import numpy as np

from dlm.tokenize.seam import TokenizedRows

MIN_LOSS_TOKENS = 1


class WindowDataset:
    """Map-style dataset of windows over rows (see module docstring).

    Attributes:
        row: 1-D int64 [n_examples], the row of each window.
        start, stop: 1-D int64 [n_examples], token bounds inside that row.
        originals: 1-D int64 [n_examples], the window each example repeats (copies of
            one share it).
    """

    def __init__(
        self,
        rows: TokenizedRows,
        sequence_len: int,
        instruction_share: float | None = None,
        replay_share: float | None = None,
        synth_repeats: int = 1,
    ) -> None:
        self.rows = rows
        lengths = rows.lengths.astype(np.int64)
        stride = max(sequence_len - 1, 1)
        counts = np.maximum(-(-(lengths - 1) // stride), 1)  # ceil((L - 1) / stride), at least 1
        self.row = np.repeat(np.arange(len(lengths), dtype=np.int64), counts)
        first = np.concatenate(([0], np.cumsum(counts)[:-1])) if len(counts) else np.zeros(0, np.int64)
        k = np.arange(self.row.shape[0], dtype=np.int64) - np.repeat(first, counts)
        self.start = k * stride
        self.stop = np.minimum(self.start + sequence_len, lengths[self.row])
        # positions start+1 .. stop-1 are predicted; those before n_prompt carry no loss
        loss_from = np.maximum(self.start + 1, rows.n_prompt.astype(np.int64)[self.row])
        keep = (self.stop - loss_from) >= MIN_LOSS_TOKENS
        self.row, self.start, self.stop = self.row[keep], self.start[keep], self.stop[keep]
        kinds = row_kinds(rows)[self.row]
        is_instruction, is_synth, is_replay = (kinds == "instruction"), (kinds == "synth"), (kinds == "replay")
        self.instruction_repeats = instruction_repeats(
            int(is_instruction.sum()), int((~is_instruction & ~is_synth & ~is_replay).sum()), instruction_share
        )
        counts = np.where(is_instruction, self.instruction_repeats, 1)
        counts[is_synth] = synth_repeats
        counts[is_replay] = replay_draws(int(is_replay.sum()), int(counts[~is_replay].sum()), replay_share)
        take = np.repeat(np.arange(self.row.shape[0]), counts)
        self.row, self.start, self.stop = self.row[take], self.start[take], self.stop[take]
        self.originals = take  # the window each example copies (dlm.train.data.Schedule)
        self.n_prompt = rows.n_prompt.astype(np.int64)

    def __len__(self) -> int:
        return int(self.row.shape[0])

    @property
    def total_tokens(self) -> int:
        return int((self.stop - self.start).sum())

    @property
    def lengths(self) -> np.ndarray:
        """1-D int64 [n_examples]: tokens per example."""
        return self.stop - self.start

    @property
    def loss_tokens(self) -> np.ndarray:
        """1-D int64 [n_examples]: tokens per example that carry loss (predicted, past the
        prompt)."""
        return self.stop - np.maximum(self.start + 1, self.n_prompt[self.row])

    def token_kinds(self, i: int, row_kind: np.ndarray) -> np.ndarray:
        """1-D int64 [n]: `row_kind` (the kind index of each row) for every token of example `i`."""
        return np.full(int(self.stop[i] - self.start[i]), row_kind[int(self.row[i])], dtype=np.int64)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        r, a, b = int(self.row[i]), int(self.start[i]), int(self.stop[i])
        ids = self.rows.read(r)[a:b].astype(np.int64)
        return _example(ids, np.arange(a, b) >= self.n_prompt[r])


class PackedDataset:
    """Map-style dataset of blocks of whole windows (see module docstring).

    Attributes:
        windows: the `WindowDataset` the blocks are made of (no repeats).
        block_start: 1-D int64 [n_blocks + 1]; block `i` holds windows
            `members[block_start[i]:block_start[i + 1]]`.
        members: 1-D int64, window indices in block order.
        order: 1-D int64 [n_examples], the block behind each example (blocks of
            instruction windows repeat under a share).
    """

    def __init__(
        self,
        rows: TokenizedRows,
        sequence_len: int,
        instruction_share: float | None = None,
        replay_share: float | None = None,
        synth_repeats: int = 1,
    ) -> None:
        self.sequence_len = sequence_len
        self.rows = rows
        self.windows = WindowDataset(rows, sequence_len)
        lengths = self.windows.stop - self.windows.start
        kinds = row_kinds(rows)[self.windows.row]
        of_row = {kind: kinds == kind for kind in ("instruction", "synth", "replay")}
        is_other = ~(of_row["instruction"] | of_row["synth"] | of_row["replay"])
        groups = [np.flatnonzero(m) for m in (is_other, of_row["instruction"], of_row["synth"], of_row["replay"])]
        blocks = [pack_blocks(lengths[g], sequence_len) for g in groups]
        self.members = np.concatenate([g[m] for g, (m, _) in zip(groups, blocks, strict=False)])
        sizes = [np.diff(b) for _, b in blocks]
        self.block_start = np.concatenate(([0], np.cumsum(np.concatenate(sizes)))).astype(np.int64)
        block_tokens = (
            np.add.reduceat(lengths[self.members], self.block_start[:-1])
            if len(self.members)
            else np.zeros(0, np.int64)
        )
        self.instruction_repeats = instruction_repeats(
            int(lengths[of_row["instruction"]].sum()), int(lengths[is_other].sum()), instruction_share
        )
        group = np.repeat(np.arange(4), [len(z) for z in sizes])  # other, instruction, synth, replay blocks
        repeats = np.choose(group, [1, self.instruction_repeats, synth_repeats, 1])
        replay_blocks = group == 3
        if replay_blocks.any() and replay_share is not None:
            # the share is of tokens: the others' tokens in units of a mean replay block
            drawn = int((block_tokens * repeats)[~replay_blocks].sum())
            mean = max(int(block_tokens[replay_blocks].mean()), 1)
            repeats[replay_blocks] = replay_draws(int(replay_blocks.sum()), drawn // mean, replay_share)
        self.order = np.repeat(np.arange(len(block_tokens), dtype=np.int64), repeats)
        self.block_tokens = block_tokens.astype(np.int64)

    def __len__(self) -> int:
        return int(self.order.shape[0])

    @property
    def total_tokens(self) -> int:
        return int(self.block_tokens[self.order].sum())

    @property
    def originals(self) -> np.ndarray:
        """1-D int64 [n_examples]: the block each example repeats (`dlm.train.data.Schedule`)."""
        return self.order

    @property
    def lengths(self) -> np.ndarray:
        """1-D int64 [n_examples]: tokens per example (block)."""
        return self.block_tokens[self.order]

    @property
    def loss_tokens(self) -> np.ndarray:
        """1-D int64 [n_examples]: tokens per block that carry loss (each member window's)."""
        per_window = self.windows.loss_tokens[self.members]
        per_block = np.add.reduceat(per_window, self.block_start[:-1]) if len(per_window) else np.zeros(0, np.int64)
        return per_block[self.order]

    def token_kinds(self, i: int, row_kind: np.ndarray) -> np.ndarray:
        """1-D int64 [n]: the kind index (`row_kind` of its row) of every token of block `i`."""
        b = int(self.order[i])
        members = self.members[self.block_start[b] : self.block_start[b + 1]]
        return np.concatenate([self.windows.token_kinds(int(m), row_kind) for m in members])

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        b = int(self.order[i])
        parts = [self.windows[int(w)] for w in self.members[self.block_start[b] : self.block_start[b + 1]]]
        for part in parts:
            part["labels"][0] = -100  # nothing of its own example precedes the first token
        return {
            "input_ids": np.concatenate([p["input_ids"] for p in parts]),
            "labels": np.concatenate([p["labels"] for p in parts]),
            "position_ids": np.concatenate([np.arange(p["input_ids"].shape[0], dtype=np.int64) for p in parts]),
        }


def pack_blocks(lengths: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Best-fit decreasing bin packing of examples into blocks of at most `capacity` tokens.

    Examples are taken longest first (ties by index, a stable sort); each goes into the
    open block with the least room that still fits it, else a new block. Open blocks
    are kept by remaining room (`capacity + 1` stacks), so finding the best fit is one
    NumPy scan of at most `capacity + 1` flags per example. Deterministic: a pure
    function of `lengths`.

    Args:
        lengths: 1-D int [n], each in `1..capacity` (tokens).
        capacity: block size in tokens (`sequence_len`).

    Returns:
        `(members, block_start)`: 1-D int64 [n] example indices in block order (each
        block's longest first) and 1-D int64 [n_blocks + 1] offsets into `members`.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    n_full = int((lengths >= capacity).sum())  # full windows come first and fill a block each
    open_at: list[list[int]] = [[] for _ in range(capacity + 1)]  # room -> open blocks (a stack)
    has_room = np.zeros(capacity + 1, dtype=bool)
    contents: list[list[int]] = [[e] for e in order[:n_full].tolist()]
    for e in order[n_full:].tolist():
        need = int(lengths[e])
        fits = np.flatnonzero(has_room[need:])
        if fits.shape[0]:
            r = need + int(fits[0])
            blk = open_at[r].pop()
            has_room[r] = bool(open_at[r])
        else:
            blk, r = len(contents), capacity
            contents.append([])
        contents[blk].append(e)
        left = r - need
        if left > 0:
            open_at[left].append(blk)
            has_room[left] = True
    members = np.fromiter((e for c in contents for e in c), dtype=np.int64, count=len(order))
    block_start = np.concatenate(([0], np.cumsum([len(c) for c in contents], dtype=np.int64)))
    return members, block_start.astype(np.int64)


def _example(ids: np.ndarray, loss_mask: np.ndarray) -> dict[str, np.ndarray]:
    labels = np.where(loss_mask, ids, -100)
    return {"input_ids": ids, "labels": labels}


def instruction_repeats(n_instruction: int, n_other: int, share: float | None) -> int:
    """How many times each instruction example is used so that instruction examples
    make up about `share` of all (see module docstring); 1 when `share` is None or one
    side is empty. Counts are examples (windows) or tokens (packing)."""
    if share is None or n_instruction == 0 or n_other == 0:
        return 1
    return max(1, round(share * n_other / ((1.0 - share) * n_instruction)))


def replay_draws(n_replay: int, n_drawn: int, share: float | None) -> np.ndarray:
    """1-D int64 [n_replay]: how many times each replay example is drawn so that replay
    makes up about `share` of all draws beside `n_drawn` others: `round(share * n_drawn /
    (1 - share))` draws spread evenly, every example `k` or `k + 1` times (the `+ 1`s at
    evenly spaced examples, so no part of the prompt set is favoured). `share` None:
    each once."""
    if n_replay == 0:
        return np.zeros(0, np.int64)
    if share is None:
        return np.ones(n_replay, np.int64)
    total = round(share * n_drawn / (1.0 - share))
    counts = np.full(n_replay, total // n_replay, np.int64)
    extra = total % n_replay
    counts[(np.arange(extra) * n_replay) // max(extra, 1)] += 1
    return counts


def row_kinds(rows: TokenizedRows) -> np.ndarray:
    """1-D object [n_rows]: each row's kind (`dlm.rows.types.RowKind`: `instruction` one
    Q/A pair, `synth` a pair drawn by `training.synth`, `replay` a general question with
    the base model's answer, `prose`, `source`), for masks such as `kinds == "synth"`."""
    return np.array(rows.kinds, dtype=object)


def example_kinds(dataset: WindowDataset | PackedDataset) -> np.ndarray:
    """1-D object [n_examples]: each training example's row kind (`row_kinds`); a packed
    block is of its first member's kind (replay, synth and instruction rows pack in blocks
    of their own)."""
    kinds = row_kinds(dataset.rows)
    if isinstance(dataset, PackedDataset):
        first = dataset.windows.row[dataset.members[dataset.block_start[:-1]]]
        return kinds[first][dataset.order]
    return kinds[dataset.row]


def build_dataset(
    rows: TokenizedRows,
    sequence_len: int,
    packing: bool,
    instruction_share: float | None = None,
    replay_share: float | None = None,
    synth_repeats: int = 1,
) -> WindowDataset | PackedDataset:
    """Windows or packed blocks over `rows`, instruction examples repeated to make up
    about `instruction_share` of the document's examples, synth examples
    `synth_repeats` times each, and replay examples drawn to make up about
    `replay_share` of all (see module docstring)."""
    kind = PackedDataset if packing else WindowDataset
    return kind(rows, sequence_len, instruction_share, replay_share, synth_repeats)
