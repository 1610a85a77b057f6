#include "quillmoor/folio_index.hpp"

#include <algorithm>
#include <fstream>
#include <utility>

namespace quillmoor {

FolioIndex::FolioIndex(std::string volume_path) : volume_path_(std::move(volume_path)) {
    main_.reserve(FOLIO_CACHE_SLOTS);
}

void FolioIndex::add(Folio folio) {
    pending_.push_back(std::move(folio));
    if (++added_since_fold_ >= FOLD_EVERY) {
        fold_segments();
    }
}

std::vector<const Folio*> FolioIndex::find(std::string_view word) const {
    std::vector<const Folio*> hits;
    for (const auto* segment : {&main_, &pending_}) {
        for (const auto& folio : *segment) {
            if (hits.size() == MAX_HITS_PER_QUERY) {
                return hits;
            }
            if (folio.transcription.find(word) != std::string::npos) {
                hits.push_back(&folio);
            }
        }
    }
    return hits;
}

std::optional<Folio> FolioIndex::at(const Shelfmark& mark) const {
    for (const auto* segment : {&pending_, &main_}) {
        auto it = std::find_if(segment->begin(), segment->end(),
                               [&](const Folio& f) { return f.mark == mark; });
        if (it != segment->end()) {
            return *it;
        }
    }
    return std::nullopt;
}

void FolioIndex::fold_segments() {
    main_.insert(main_.end(), std::make_move_iterator(pending_.begin()),
                 std::make_move_iterator(pending_.end()));
    pending_.clear();
    added_since_fold_ = 0;
    write_volume();
}

void FolioIndex::write_volume() const {
    std::ofstream out(volume_path_, std::ios::binary | std::ios::trunc);
    for (const auto& folio : main_) {
        out << folio.mark.str() << '\t' << folio.transcription << '\n';
    }
}

}  // namespace quillmoor
