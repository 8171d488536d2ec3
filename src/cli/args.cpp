#include "cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>

namespace flashlab {
namespace cli {
namespace {

// ---- value parsers: the whole string must be consumed, errors name the option

Status parse_int(const std::string& opt, const std::string& s, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE)
    return Status::Invalid(opt + ": '" + s + "' is not an integer");
  *out = static_cast<int64_t>(v);
  return Status::Ok();
}

Status parse_int32(const std::string& opt, const std::string& s, int32_t* out) {
  int64_t v = 0;
  FLASHLAB_RETURN_IF_ERROR(parse_int(opt, s, &v));
  if (v < INT32_MIN || v > INT32_MAX) return Status::Invalid(opt + ": '" + s + "' is out of range");
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

// Counts (iterations, threads): small integers in [lo, 1000000]; one message for every value out
// of range ("--iters (0) must be in [1, 1000000]", the same for -3).
Status parse_count(const std::string& opt, const std::string& s, int* out, int lo = 0) {
  int64_t v = 0;
  FLASHLAB_RETURN_IF_ERROR(parse_int(opt, s, &v));
  if (v < lo || v > 1000000)
    return Status::Invalid(opt + " (" + s + ") must be in [" + std::to_string(lo) + ", 1000000]");
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status parse_double(const std::string& opt, const std::string& s, double* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    return Status::Invalid(opt + ": '" + s + "' is not a finite number");
  *out = v;
  return Status::Ok();
}

Status parse_float(const std::string& opt, const std::string& s, float* out) {
  double v = 0;
  FLASHLAB_RETURN_IF_ERROR(parse_double(opt, s, &v));
  *out = static_cast<float>(v);
  return Status::Ok();
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, ',')) parts.push_back(cur);
  if (!s.empty() && s.back() == ',') parts.push_back("");  // "1,2," has an empty last entry
  return parts;
}

Status parse_lengths(const std::string& opt, const std::string& s, std::vector<int32_t>* out) {
  out->clear();
  for (const std::string& part : split_commas(s)) {
    int32_t v = 0;
    FLASHLAB_RETURN_IF_ERROR(parse_int32(opt, part, &v));
    out->push_back(v);
  }
  if (out->empty()) return Status::Invalid(opt + ": expected a comma-separated list of lengths");
  return Status::Ok();
}

// One option: its name, whether it takes a value, and what it does with it.
struct OptionSpec {
  const char* name;
  bool takes_value;
  std::function<Status(const std::string& opt, const std::string& value)> apply;
};

std::vector<OptionSpec> bench_options(BenchOptions* o) {
  auto int_opt = [](int64_t* dst) {
    return [dst](const std::string& opt, const std::string& v) { return parse_int(opt, v, dst); };
  };
  auto flag = [](bool* dst) {
    return [dst](const std::string&, const std::string&) {
      *dst = true;
      return Status::Ok();
    };
  };
  return {
      {"--batch", true, int_opt(&o->batch)},
      {"--heads", true, int_opt(&o->heads)},
      {"--heads-kv", true, int_opt(&o->heads_kv)},
      {"--seqlen-q", true, int_opt(&o->seqlen_q)},
      {"--seqlen-k", true, int_opt(&o->seqlen_k)},
      {"--seqlen", true,
       [o](const std::string& opt, const std::string& v) {
         FLASHLAB_RETURN_IF_ERROR(parse_int(opt, v, &o->seqlen_q));
         o->seqlen_k = o->seqlen_q;
         return Status::Ok();
       }},
      {"--head-dim", true, int_opt(&o->head_dim)},
      {"--dtype", true,
       [o](const std::string& opt, const std::string& v) {
         Status st = parse_dtype(v, &o->dtype);
         if (!st.ok()) return Status::Invalid(opt + ": " + st.message());
         return Status::Ok();
       }},
      {"--causal", false, flag(&o->causal)},
      {"--align", true,
       [o](const std::string& opt, const std::string& v) {
         if (v == "bottom-right") o->align = CausalAlign::kBottomRight;
         else if (v == "top-left") o->align = CausalAlign::kTopLeft;
         else return Status::Invalid(opt + ": '" + v + "' is not bottom-right or top-left");
         return Status::Ok();
       }},
      {"--window", true,
       [o](const std::string& opt, const std::string& v) {
         const std::vector<std::string> lr = split_commas(v);
         if (lr.size() != 2) return Status::Invalid(opt + ": '" + v + "' is not L,R (e.g. 128,0)");
         FLASHLAB_RETURN_IF_ERROR(parse_int(opt, lr[0], &o->window_left));
         return parse_int(opt, lr[1], &o->window_right);
       }},
      {"--sink-tokens", true, int_opt(&o->sink_tokens)},
      {"--softcap", true,
       [o](const std::string& opt, const std::string& v) { return parse_float(opt, v, &o->softcap); }},
      {"--alibi", false, flag(&o->alibi)},
      {"--sinks", false, flag(&o->sinks)},
      {"--dropout", true,
       [o](const std::string& opt, const std::string& v) { return parse_float(opt, v, &o->dropout); }},
      {"--seed", true,
       [o](const std::string& opt, const std::string& v) {
         int64_t s = 0;
         FLASHLAB_RETURN_IF_ERROR(parse_int(opt, v, &s));
         o->seed = static_cast<uint64_t>(s);
         return Status::Ok();
       }},
      {"--varlen", true,
       [o](const std::string& opt, const std::string& v) { return parse_lengths(opt, v, &o->varlen_q); }},
      {"--varlen-k", true,
       [o](const std::string& opt, const std::string& v) { return parse_lengths(opt, v, &o->varlen_k); }},
      {"--impl", true,
       [o](const std::string& opt, const std::string& v) {
         o->impls.clear();
         o->impls_explicit = true;
         for (const std::string& name : split_commas(v)) {
           Impl impl = Impl::kAuto;
           Status st = parse_impl(name, &impl);
           if (!st.ok()) return Status::Invalid(opt + ": " + st.message());
           if (impl == Impl::kAuto)
             return Status::Invalid(opt + ": 'auto' is not an implementation; name one");
           o->impls.push_back(impl);
         }
         if (o->impls.empty()) return Status::Invalid(opt + ": expected a comma-separated list");
         return Status::Ok();
       }},
      {"--backward", false, flag(&o->backward)},
      {"--warmup", true,
       [o](const std::string& opt, const std::string& v) { return parse_count(opt, v, &o->warmup); }},
      {"--iters", true,
       [o](const std::string& opt, const std::string& v) {
         FLASHLAB_RETURN_IF_ERROR(parse_count(opt, v, &o->iters, 1));
         o->iters_explicit = true;
         return Status::Ok();
       }},
      {"--threads", true,
       [o](const std::string& opt, const std::string& v) { return parse_count(opt, v, &o->threads); }},
      {"--tol", true,
       [o](const std::string& opt, const std::string& v) {
         const std::vector<std::string> parts = split_commas(v);
         if (parts.empty() || parts.size() > 2)
           return Status::Invalid(opt + ": '" + v + "' is not REL or REL,ABS");
         FLASHLAB_RETURN_IF_ERROR(parse_double(opt, parts[0], &o->tol_rel_l2));
         o->tol_max_abs = 2 * o->tol_rel_l2;
         if (parts.size() == 2) FLASHLAB_RETURN_IF_ERROR(parse_double(opt, parts[1], &o->tol_max_abs));
         if (o->tol_rel_l2 < 0 || o->tol_max_abs < 0)
           return Status::Invalid(opt + ": tolerances must be non-negative");
         return Status::Ok();
       }},
      {"--check", false, flag(&o->force_check)},
      {"--no-check", false, flag(&o->no_check)},
      {"--no-sgemm", false, flag(&o->no_sgemm)},
      {"--decode", false, flag(&o->decode)},
      {"--cache-len", true, int_opt(&o->cache_len)},
      {"--page-size", true, int_opt(&o->page_size)},
      {"--page-order", true,
       [o](const std::string& opt, const std::string& v) {
         if (v != "shuffled" && v != "sequential")
           return Status::Invalid(opt + ": '" + v + "' is not shuffled or sequential");
         o->pages_in_order = v == "sequential";
         return Status::Ok();
       }},
      {"--splits", true, int_opt(&o->splits)},
      {"--json", false, flag(&o->json)},
      {"--quiet", false, flag(&o->quiet)},
      {"--help", false, flag(&o->help)},
      {"-h", false, flag(&o->help)},
  };
}

bool was_given(const BenchOptions& o, const char* name) {
  for (const std::string& g : o.given)
    if (g == name) return true;
  return false;
}

// Decode mode times attention_with_kvcache on a full cache: the options of the training shape
// (masks, varlen, backward, the sgemm peer) have no meaning there and are refused by name rather
// than silently ignored. Without --decode the cache options are refused the same way.
Status check_decode_options(BenchOptions* o) {
  static const char* const kDecodeOptions[] = {
      "--decode", "--cache-len", "--page-size", "--page-order", "--splits", "--batch", "--heads",  "--heads-kv", "--head-dim",
      "--seqlen", "--seqlen-q",  "--dtype",     "--impl",  "--warmup", "--iters",    "--threads",
      "--seed",   "--tol",       "--no-check",  "--json",  "--quiet",  "--help",     "-h"};
  if (!o->decode) {
    for (const char* name : {"--cache-len", "--page-size", "--page-order", "--splits"})
      if (was_given(*o, name)) return Status::Invalid(std::string(name) + " needs --decode");
    return Status::Ok();
  }
  for (const std::string& g : o->given) {
    bool ok = false;
    for (const char* name : kDecodeOptions) ok = ok || g == name;
    if (!ok)
      return Status::Invalid(g + " does not apply to --decode (decode mode times the forward of "
                                 "attention_with_kvcache on a full cache; see flashlab bench --help)");
  }
  if (was_given(*o, "--page-order") && o->page_size == 0)
    return Status::Invalid("--page-order needs a paged cache (--page-size P > 0)");
  // In decode mode --seqlen / --seqlen-q count the queries per sequence (default 1: one token).
  if (!was_given(*o, "--seqlen") && !was_given(*o, "--seqlen-q")) o->seqlen_q = 1;
  o->seqlen_k = o->cache_len;
  o->backward = false;
  return Status::Ok();
}

}  // namespace

Status parse_bench_args(int argc, char** argv, int first, BenchOptions* out) {
  BenchOptions o;
  // `flashlab bench` alone (output options aside) is the demo run: the default shape, forward
  // and backward. Any other option means "exactly what I asked for": forward unless --backward.
  o.backward = true;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a != "--json" && a != "--quiet") o.backward = false;
  }
  const std::vector<OptionSpec> specs = bench_options(&o);
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool has_inline_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {  // --name=value
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline_value = true;
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& s : specs)
      if (arg == s.name) spec = &s;
    if (!spec) return Status::Invalid("unknown option '" + arg + "' (see flashlab bench --help)");
    if (spec->takes_value && !has_inline_value) {
      // No value starts with "--" (negative numbers have one dash): "--iters --quiet" lacks one.
      if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0)
        return Status::Invalid(arg + " needs a value");
      value = argv[++i];
    } else if (!spec->takes_value && has_inline_value) {
      return Status::Invalid(arg + " takes no value");
    }
    FLASHLAB_RETURN_IF_ERROR(spec->apply(arg, value));
    o.given.push_back(arg);
  }
  FLASHLAB_RETURN_IF_ERROR(check_decode_options(&o));
  if (o.heads_kv < 0) o.heads_kv = o.heads;
  if (!o.varlen_k.empty() && o.varlen_q.empty())
    return Status::Invalid("--varlen-k needs --varlen (the query lengths)");
  if (o.varlen_k.empty()) o.varlen_k = o.varlen_q;
  if (o.varlen_k.size() != o.varlen_q.size())
    return Status::Invalid("--varlen-k has " + std::to_string(o.varlen_k.size()) +
                           " lengths but --varlen has " + std::to_string(o.varlen_q.size()));
  *out = o;
  return Status::Ok();
}

const char* bench_usage() {
  return R"(usage: flashlab bench [options]

Checks each implementation against the float64 reference, then times it, and prints one table
(ms, TFLOP/s, peak extra memory, errors) with an OpenBLAS sgemm of the same FLOPs as a CPU peer.
`flashlab bench` alone (or with only --json / --quiet) runs the default shape, forward and
backward: --batch 2 --heads 8 --seqlen 1024 --head-dim 64 --dtype bf16 --backward

shape:
  --batch N            batch size (default 2; ignored with --varlen)
  --heads N            query heads (default 8)
  --heads-kv N         key/value heads, heads must be a multiple (default: --heads)
  --seqlen N           query and key length (default 1024)
  --seqlen-q N         query length
  --seqlen-k N         key length
  --head-dim N         head dimension (default 64)
  --dtype T            fp32 | fp16 | bf16 (default bf16)
  --varlen L1,L2,...   variable-length batch: one query length per sequence (packed tensors)
  --varlen-k L1,...    key lengths for --varlen (default: the query lengths)
mask and scores:
  --causal             causal mask
  --align A            bottom-right (FlashAttention) | top-left (PyTorch SDPA); default bottom-right
  --window L,R         sliding window: L keys left, R keys right of the diagonal (-1 = unbounded)
  --sink-tokens N      StreamingLLM sink tokens: the first N keys stay visible left of the window
                       (cpu backends, cuda_sm80, cuda_sm90; the learning kernels refuse it)
  --softcap C          s = C * tanh(s / C)
  --alibi              ALiBi with the standard slopes 2^(-8h/H)
  --sinks              attention sinks: one random logit per query head (cpu backends, cuda_sm80,
                       cuda_sm90; the learning kernels refuse it)
  --dropout P          dropout probability on the attention weights, in [0, 1)
  --seed N             seed of the random inputs and of the dropout mask (default 42)
what to run:
  --impl A,B,...       implementations (default: all available here; see `flashlab info`)
  --backward           also check and time the backward pass (implied when no option is given)
  --warmup N           untimed runs before timing (default 1)
  --iters N            timed runs, N >= 1, median reported (default 10, fewer for slow impls:
                       see docs); a note warns when the runs spread widely (max/min > 1.5)
  --threads N          CPU threads for the CPU impls and the sgemm peer (default: all)
  --tol REL[,ABS]      override the tolerance: rel_l2 <= REL, max_abs <= ABS * max(1, max|ref|)
                       (ABS defaults to 2 * REL)
  --check              run the reference check even when it needs a lot of memory
  --no-check           time only: skip the reference (outputs are still checked for NaN and
                       unwritten elements); for performance sweeps whose shapes the tests cover
  --no-sgemm           skip the OpenBLAS sgemm peer row
decode mode (attention_with_kvcache, reports TB/s of K/V read; docs/cli.md):
  --decode             time attention against a KV cache filled to --cache-len for every sequence;
                       accepts the shape options (--seqlen = queries per sequence, default 1),
                       --dtype, --impl, --warmup, --iters, --threads, --seed, --tol, --no-check,
                       --json, --quiet; the CPU implementations, and the CUDA KV-cache kernels
                       (cuda_sm80) in a CUDA build on a GPU
  --cache-len L        cached keys per sequence (default 4096)
  --page-size P        0 = contiguous cache (default), P > 0 = paged cache, shuffled page table
  --page-order O       shuffled (default: neighbouring pages far apart, as in a long-running
                       server) or sequential (page table 0, 1, 2, ...: the paged kernel's cost
                       without the scattered addresses); needs --page-size P > 0
  --splits N           splits of the keys: 0 = the library's choice (default), N > 0 forced
output:
  --json               one JSON document on stdout instead of the table
  --quiet              no progress lines on stderr
  -h, --help           this text

Exit status: 0 all checks passed, 1 a check failed or an implementation returned an error,
2 bad arguments.
)";
}

const char* tool_usage() {
  return R"(usage: flashlab <command> [options]

commands:
  bench    check and time attention implementations on one shape (flashlab bench --help)
  info     version, build configuration, implementations and CUDA devices
  help     this text

Documentation: docs/cli.md
)";
}

}  // namespace cli
}  // namespace flashlab
