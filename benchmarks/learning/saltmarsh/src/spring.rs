//! Tile sources. Anything that can produce a tile's bytes implements `TileSpring`.

use std::time::Duration;

use crate::tile::TileKey;

/// How long a request to the upstream tile server may take (milliseconds).
pub const UPSTREAM_TIMEOUT_MS: u64 = 2200;

/// A source of tiles: the upstream tile server, or a folder of pre-rendered tiles.
pub trait TileSpring {
    /// The tile's PNG bytes, or None when the source has no such tile.
    fn fetch(&self, key: TileKey, timeout: Duration) -> Option<Vec<u8>>;
}

/// The default deadline for `TileSpring::fetch`.
pub fn upstream_timeout() -> Duration {
    Duration::from_millis(UPSTREAM_TIMEOUT_MS)
}
