#include "formats/json_checked.h"

#include <utility>
#include <vector>

#include "base/error.h"

namespace flint {

namespace {

using nlohmann::json;

// nlohmann quotes the bytes it last read, which may be invalid UTF-8: keep ASCII only.
std::string ascii_only(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7E) c = '?';
  }
  return out;
}

// A SAX handler that builds the document like nlohmann's own DOM parser and also records
// the first repeated key. (nlohmann's parser-callback API cannot be used here: on every
// object end it rescans the parent object, which is quadratic on a header with 100k
// tensors.)
class CheckingBuilder {
 public:
  explicit CheckingBuilder(CheckedJson& result) : result_(result) {}

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(json::number_integer_t value) { return add(value); }
  bool number_unsigned(json::number_unsigned_t value) { return add(value); }
  bool number_float(json::number_float_t value, const json::string_t& /*text*/) {
    return add(value);
  }
  bool string(json::string_t& value) { return add(std::move(value)); }
  bool binary(json::binary_t& value) { return add(json::binary(std::move(value))); }

  bool start_object(std::size_t /*size*/) { return open(json::object(), true); }
  bool start_array(std::size_t /*size*/) { return open(json::array(), false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& key) {
    Frame& top = frames_.back();
    // The object being built is itself the set of keys seen so far.
    auto [it, inserted] = top.value->get_ref<json::object_t&>().try_emplace(key);
    if (!inserted && result_.duplicate_path.empty()) {
      for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
        result_.duplicate_path.push_back(frames_[i].is_object ? frames_[i].last_key : "[]");
      }
      result_.duplicate_path.push_back(key);
    }
    if (frames_.size() == 1) result_.root_keys.push_back(key);
    slot_ = &it->second;
    top.last_key = std::move(key);
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& error) {
    error_ = ascii_only(error.what());
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  struct Frame {
    json* value = nullptr;
    bool is_object = false;
    std::string last_key;
  };

  // Places `value` where the grammar says the next value goes; returns its address.
  template <typename Value>
  json* place(Value&& value) {
    if (frames_.empty()) {
      result_.value = json(std::forward<Value>(value));
      return &result_.value;
    }
    Frame& top = frames_.back();
    if (top.is_object) {
      *slot_ = json(std::forward<Value>(value));
      return slot_;
    }
    top.value->push_back(json(std::forward<Value>(value)));
    return &top.value->back();
  }
  template <typename Value>
  bool add(Value&& value) {
    place(std::forward<Value>(value));
    return true;
  }
  bool open(json container, bool is_object) {
    json* where = place(std::move(container));
    frames_.push_back(Frame{where, is_object, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  CheckedJson& result_;
  std::vector<Frame> frames_;
  json* slot_ = nullptr;  // the member created by the last key
  std::string error_;
};

}  // namespace

std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
  }
  return out;
}

CheckedJson parse_json_checked(std::string_view text, const std::string& label,
                               std::string_view what) {
  CheckedJson result;
  CheckingBuilder builder(result);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const json::exception& e) {  // not expected from the SAX parser; be safe
    throw Error("{}: {} is not valid JSON: {}", label, what, ascii_only(e.what()));
  }
  if (!ok) throw Error("{}: {} is not valid JSON: {}", label, what, builder.error());
  return result;
}

}  // namespace flint
