"""The tokenize seam: rows in, lazily readable token ids out (see `seam`)."""
