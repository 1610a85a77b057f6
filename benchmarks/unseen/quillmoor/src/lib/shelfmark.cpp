#include "quillmoor/shelfmark.hpp"

#include <charconv>
#include <stdexcept>
#include <utility>

namespace quillmoor {

Shelfmark::Shelfmark(std::string press, std::string shelf, unsigned folio)
    : press_(std::move(press)), shelf_(std::move(shelf)), folio_(folio) {}

std::string Shelfmark::str() const {
    return press_ + SHELFMARK_SEPARATOR + shelf_ + SHELFMARK_SEPARATOR + std::to_string(folio_);
}

Shelfmark parse_shelfmark(std::string_view text) {
    if (text.empty() || text.size() > SHELFMARK_MAX_LEN) {
        throw std::invalid_argument("shelfmark is empty or too long");
    }
    const auto first = text.find(SHELFMARK_SEPARATOR);
    const auto second = text.find(SHELFMARK_SEPARATOR, first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) {
        throw std::invalid_argument("shelfmark needs press, shelf and folio");
    }
    const auto number = text.substr(second + 1);
    unsigned folio = 0;
    const auto [end, err] = std::from_chars(number.data(), number.data() + number.size(), folio);
    if (err != std::errc{} || end != number.data() + number.size()) {
        throw std::invalid_argument("folio number is not a whole number");
    }
    return Shelfmark(std::string(text.substr(0, first)),
                     std::string(text.substr(first + 1, second - first - 1)), folio);
}

}  // namespace quillmoor
