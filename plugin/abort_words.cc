#include "abort_words.h"

#include <mutex>
#include <vector>

namespace car {
namespace {

struct KeptWords {
  std::mutex mutex;
  std::vector<std::uint32_t*> words;
};

// Never destroyed: engines go at exit too.
KeptWords& keptWords() {
  static auto* kept = new KeptWords;
  return *kept;
}

}  // namespace

cudaError_t takeAbortWord(std::uint32_t** word) {
  KeptWords& kept = keptWords();
  {
    std::lock_guard<std::mutex> lock(kept.mutex);
    if (!kept.words.empty()) {
      *word = kept.words.back();
      kept.words.pop_back();
      *static_cast<volatile std::uint32_t*>(*word) = 0;
      return cudaSuccess;
    }
  }
  void* fresh = nullptr;
  const cudaError_t err = cudaHostAlloc(&fresh, sizeof(std::uint32_t), cudaHostAllocMapped | cudaHostAllocPortable);
  if (err != cudaSuccess) return err;
  *static_cast<volatile std::uint32_t*>(fresh) = 0;
  *word = static_cast<std::uint32_t*>(fresh);
  return cudaSuccess;
}

void keepAbortWord(std::uint32_t* word) {
  if (word == nullptr) return;
  KeptWords& kept = keptWords();
  std::lock_guard<std::mutex> lock(kept.mutex);
  kept.words.push_back(word);
}

int keptAbortWords() {
  KeptWords& kept = keptWords();
  std::lock_guard<std::mutex> lock(kept.mutex);
  return static_cast<int>(kept.words.size());
}

}  // namespace car
