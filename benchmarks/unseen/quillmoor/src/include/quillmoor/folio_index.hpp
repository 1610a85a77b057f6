// Quillmoor: an index of digitised manuscript folios.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quillmoor/shelfmark.hpp"

namespace quillmoor {

/// How many folios the index keeps decoded in memory at once.
constexpr std::size_t FOLIO_CACHE_SLOTS = 3217;

/// The index folds its pending segments after this many added folios.
constexpr std::size_t FOLD_EVERY = 640;

/// The most hits a single search hands back, however many folios match.
constexpr std::size_t MAX_HITS_PER_QUERY = 283;

/// The suffix of a volume file on disk.
constexpr std::string_view VOLUME_EXTENSION = ".qmvol";

/// One scanned page: where it is shelved and the text read from it.
struct Folio {
    Shelfmark mark;
    std::string transcription;
};

/// The searchable index of every folio in one volume file.
class FolioIndex {
public:
    explicit FolioIndex(std::string volume_path);

    /// Add a folio; every FOLD_EVERY additions the pending segments are folded.
    void add(Folio folio);

    /// The folios whose transcription contains `word`, at most MAX_HITS_PER_QUERY.
    std::vector<const Folio*> find(std::string_view word) const;

    /// The folio shelved under `mark`, if the index has it.
    std::optional<Folio> at(const Shelfmark& mark) const;

    /// Merge the pending segments into the main segment and write the volume file.
    void fold_segments();

private:
    std::string volume_path_;
    std::vector<Folio> main_;
    std::vector<Folio> pending_;
    std::size_t added_since_fold_ = 0;

    void write_volume() const;
};

}  // namespace quillmoor
