// Shelfmarks: where a folio sits in the muniment room.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace quillmoor {

/// The longest shelfmark accepted, in characters.
constexpr std::size_t SHELFMARK_MAX_LEN = 53;

/// The character between the parts of a written shelfmark.
constexpr char SHELFMARK_SEPARATOR = '/';

/// A parsed shelfmark: press, shelf and folio number, as in "QM/Ve/0089".
class Shelfmark {
public:
    Shelfmark(std::string press, std::string shelf, unsigned folio);

    const std::string& press() const { return press_; }
    const std::string& shelf() const { return shelf_; }
    unsigned folio() const { return folio_; }

    /// The shelfmark written back as text, parts joined by SHELFMARK_SEPARATOR.
    std::string str() const;

    bool operator==(const Shelfmark& other) const = default;

private:
    std::string press_;
    std::string shelf_;
    unsigned folio_;
};

/// Parse a written shelfmark; throws std::invalid_argument when it is malformed
/// or longer than SHELFMARK_MAX_LEN characters.
Shelfmark parse_shelfmark(std::string_view text);

}  // namespace quillmoor
