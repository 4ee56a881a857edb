// nlb linearize: write a model directory in which chosen layers' MLPs are their float64 ridge
// surrogates (PAPERS §A1) or gated MLPs from `nlb budget`'s gates file (PAPERS §A3), for
// `nlb eval`, load_model and tools/python/finetune_linearized.py (PAPERS §A6).
// File format and what is fitted how: docs/linearize.md.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common.hpp"
#include "nlb/analysis/budget/fit_stage.hpp"
#include "nlb/io/safetensors.hpp"
#include "nlb/io/safetensors_writer.hpp"
#include "nlb/model/load_model.hpp"
#include "session.hpp"

namespace nlb::cli {

namespace {

namespace fs = std::filesystem;

// "1", "0,2", "1-3", "0,2-3": sorted, distinct, each in [0, n_layers).
std::vector<Index> parse_layers(const std::string& text, Index n_layers) {
  auto bad = [&](const std::string& why) {
    return UsageError("--layers \"" + text + "\": " + why + " (expected a comma-separated list " +
                      "of layer indices or ranges a-b in [0, " + std::to_string(n_layers) + "))");
  };
  auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 9 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      throw bad("\"" + s + "\" is not a layer index");
    }
    const Index v = std::stoll(s);
    if (v >= n_layers)
      throw bad("layer " + s + " does not exist");
    return v;
  };
  std::set<Index> layers;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t dash = item.find('-');
    const Index first = number(item.substr(0, dash));
    const Index last = dash == std::string::npos ? first : number(item.substr(dash + 1));
    if (last < first)
      throw bad("range " + item + " runs backwards");
    for (Index l = first; l <= last; ++l) {
      if (!layers.insert(l).second)
        throw bad("layer " + std::to_string(l) + " is listed twice");
    }
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return {layers.begin(), layers.end()};
}

// One layer's new MLP parts, in double: y = x W + b, and for a gated layer the folded gate.
struct LayerParts {
  Eigen::MatrixXd weight;   // [d, d]
  Eigen::RowVectorXd bias;  // [d]
  bool gated = false;
  Eigen::RowVectorXd gate_weight;  // [d]
  double gate_bias = 0.0;
  double gate_threshold = 0.0;
  double r2 = std::numeric_limits<double>::quiet_NaN();  // fit R² (fitted surrogates only)
};

// The safetensors files of a model directory (one file or the shards of an index).
std::vector<io::SafetensorsFile> open_weights(const fs::path& dir) {
  std::vector<io::SafetensorsFile> files;
  if (fs::exists(dir / "model.safetensors")) {
    files.push_back(io::SafetensorsFile::open(dir / "model.safetensors"));
    return files;
  }
  const fs::path index = dir / "model.safetensors.index.json";
  std::ifstream in(index);
  if (!in)
    throw FormatError(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  std::set<std::string> shards;
  try {
    for (const auto& [tensor, shard] : nlohmann::json::parse(in).at("weight_map").items())
      shards.insert(shard.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(index.string() + ": expected a JSON object with a weight_map: " + e.what());
  }
  for (const auto& shard : shards)
    files.push_back(io::SafetensorsFile::open(dir / shard));
  return files;
}

// Copies tensor `name` of `file` into `out` in its own dtype (values are exact in double).
void copy_tensor(const io::SafetensorsFile& file, const io::TensorInfo& t,
                 io::SafetensorsWriter& out) {
  if (io::is_floating(t.dtype)) {
    out.add(t.name, t.dtype, t.shape, file.read<double>(t.name));
  } else {
    out.add_int(t.name, t.dtype, t.shape, file.read<std::int64_t>(t.name));
  }
}

// The gates file of `nlb budget`: per layer surrogate and folded gate (docs/linearize.md).
LayerParts read_gate_layer(const io::SafetensorsFile& gates, Index layer, Index d) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  const std::string file = gates.path().string();
  for (const char* name :
       {"surrogate.weight", "surrogate.bias", "gate.weight", "gate.bias", "gate.threshold"}) {
    if (!gates.contains(p + name)) {
      throw FormatError(file + ": missing tensor \"" + p + name + "\" (layer " +
                        std::to_string(layer) + " is listed in --layers)");
    }
  }
  LayerParts parts;
  parts.gated = true;
  parts.weight = gates.read_matrix<double>(p + "surrogate.weight", d, d);
  parts.bias = gates.read_row_vector<double>(p + "surrogate.bias", d);
  parts.gate_weight = gates.read_row_vector<double>(p + "gate.weight", d);
  parts.gate_bias = gates.read_row_vector<double>(p + "gate.bias", 1)(0);
  parts.gate_threshold = gates.read_row_vector<double>(p + "gate.threshold", 1)(0);
  return parts;
}

// The fit input: a text (--fit-text, default data/kjv-fit.txt) or a token-id file.
const TokenInput fit_input{"fit-text", "fit-tokens-file"};

// How surrogates are fitted: nlb budget's defaults (BudgetProtocol{}), so that a linearized
// layer is the budget report's surrogate unless an option says otherwise.
struct FitSettings {
  TokenStream tokens;
  Index context = 0;
  Index positions = 0;
  double lambda = 0.0;
};

FitSettings fit_settings(const Args& args, const ModelConfig& config, const fs::path& model_dir) {
  const BudgetProtocol defaults;
  FitSettings fit;
  fit.tokens = read_token_input(args, config, model_dir, fit_input, token_dtype(args, {fit_input}),
                                source_dir() / "data/kjv-fit.txt");
  fit.context = args.integer("context", std::min(defaults.context, config.n_positions), 2,
                             config.n_positions);
  fit.positions = args.integer("fit-positions", defaults.fit_tokens, 2, 1LL << 40);
  fit.lambda = args.real("lambda", defaults.lambda, 1e-300, 1e300);
  return fit;
}

// The listed layers' surrogates: nlb budget's fit (fit_surrogates, PAPERS §A1) on the fit
// tokens, with the model in double. The tokens are checked before the model is loaded.
std::vector<LayerParts> fit_layers(const fs::path& model_dir, const FitSettings& fit,
                                   const std::vector<Index>& layers) {
  const auto& tokens = fit.tokens.tokens;
  const Index context = fit.context, positions = fit.positions;
  const Index needed = (positions + context - 1) / context * context;
  if (static_cast<Index>(tokens.size()) < needed) {
    throw ArgumentError(detail::expected_found("fit tokens: " + std::to_string(positions) +
                                                   " positions in windows of " +
                                                   std::to_string(context) + " need",
                                               std::to_string(needed) + " tokens", tokens.size()));
  }
  const auto model = load_model<double>(model_dir);
  Context<backend::cpu> ctx(host_threads());
  ModelRunner<double> runner(ctx, model);
  BudgetProtocol protocol;
  protocol.context = context;
  protocol.fit_tokens = positions;
  protocol.lambda = fit.lambda;
  const auto fitted = fit_surrogates<double>(runner, tokens, protocol, "fit tokens",
                                             Progress("linearize: fit windows"));
  std::vector<LayerParts> out;
  for (Index layer : layers) {
    const auto l = static_cast<std::size_t>(layer);
    LayerParts parts;
    parts.weight = fitted.surrogates[l].weight();
    parts.bias = fitted.surrogates[l].bias();
    parts.r2 = fitted.reports[l].r2;
    out.push_back(std::move(parts));
  }
  return out;
}

// Files a Hugging Face model directory may hold besides its weights and config, copied as is.
bool is_companion_file(const std::string& name) {
  static const std::set<std::string> names{"tokenizer.json",
                                           "tokenizer_config.json",
                                           "vocab.json",
                                           "merges.txt",
                                           "vocab.txt",
                                           "special_tokens_map.json",
                                           "added_tokens.json",
                                           "tokenizer.model",
                                           "generation_config.json",
                                           "README.md"};
  return names.count(name) > 0;
}

bool is_nonempty_dir(const fs::path& p) {
  return fs::is_directory(p) && fs::directory_iterator(p) != fs::directory_iterator();
}

// The options that set how surrogates are fitted are refused with --gates; both options of the
// fit input, or --token-dtype without a token-id file, are usage errors either way.
void check_fit_options(const Args& args, bool gated) {
  if (gated) {
    for (const char* option :
         {"fit-text", "fit-tokens-file", "token-dtype", "fit-positions", "context", "lambda"}) {
      if (args.has(option)) {
        throw UsageError(std::string("--") + option +
                         " sets how surrogates are fitted; with --gates they come from the file");
      }
    }
  }
  has_token_input(args, fit_input);  // both --fit-text and --fit-tokens-file: a usage error
  token_dtype(args, {fit_input});    // --token-dtype without --fit-tokens-file: likewise
}

// The output is checked before any work, and never the model directory itself.
void check_output_dir(const fs::path& out_dir, const fs::path& model_dir, bool force) {
  if (!fs::exists(out_dir))
    return;
  if (fs::exists(model_dir) && fs::equivalent(out_dir, model_dir))
    throw UsageError("--out " + out_dir.string() + " is the model directory itself");
  if (!fs::is_directory(out_dir))
    throw UsageError("--out " + out_dir.string() + " exists and is not a directory");
  if (is_nonempty_dir(out_dir) && !force) {
    throw UsageError("--out " + out_dir.string() +
                     " exists and is not empty (pass --force to replace it)");
  }
}

// The model's config, of an architecture linearize handles.
ModelConfig read_linearize_config(const fs::path& model_dir) {
  if (!fs::is_directory(model_dir))
    throw FormatError(model_dir.string() + ": not a model directory");
  const fs::path config_path = model_dir / "config.json";
  ModelConfig config = read_hf_config(config_path);
  if (config.architecture == Architecture::nlb_sd) {
    throw ArgumentError(config_path.string() +
                        ": nlb linearize handles model_type \"gpt2\", \"gpt_neox\" and the Llama "
                        "family (\"llama\", \"qwen2\", \"mistral\")");
  }
  return config;
}

// --layers, each of which must have a full MLP.
std::vector<Index> read_layers(const Args& args, const ModelConfig& config,
                               const fs::path& config_path) {
  const std::vector<Index> layers = parse_layers(args.get("layers"), config.n_layers);
  for (Index layer : layers) {
    if (config.mlp_kind(layer) != MlpKind::full) {
      throw ArgumentError(detail::expected_found(
          config_path.string() + ": layer " + std::to_string(layer) + " MLP kind", "\"full\"",
          std::string("\"") + to_string(config.mlp_kind(layer)) + "\""));
    }
  }
  return layers;
}

// The listed layers' surrogates and folded gates from a gates file of nlb budget.
std::vector<LayerParts> read_gate_parts(const std::string& path, const std::vector<Index>& layers,
                                        Index d) {
  const auto gates = io::SafetensorsFile::open(path);
  const auto it = gates.metadata().find("format");
  if (it == gates.metadata().end() || it->second != "nlb-gates") {
    throw FormatError(detail::expected_found(
        gates.path().string() + ": metadata \"format\"", "\"nlb-gates\"",
        it == gates.metadata().end() ? std::string("none") : "\"" + it->second + "\""));
  }
  std::vector<LayerParts> parts;
  for (Index layer : layers)
    parts.push_back(read_gate_layer(gates, layer, d));
  return parts;
}

// Tensor names of a layer's MLP in the source files (the loader's conventions).
struct MlpTensorNames {
  const ModelConfig* config;
  bool prefixed = false;  // GPT-2 names start with "transformer."

  std::string prefix(Index layer) const {
    const std::string l = std::to_string(layer);
    if (is_llama_family(config->architecture))
      return "model.layers." + l + ".mlp.";
    return config->architecture == Architecture::gpt2
               ? std::string(prefixed ? "transformer." : "") + "h." + l + ".mlp."
               : "gpt_neox.layers." + l + ".mlp.";
  }
  std::vector<std::string> full() const {
    if (is_llama_family(config->architecture))
      return {detail::llama_mlp_tensors.begin(), detail::llama_mlp_tensors.end()};
    return config->architecture == Architecture::gpt2
               ? std::vector<std::string>{"c_fc.weight", "c_fc.bias", "c_proj.weight",
                                          "c_proj.bias"}
               : std::vector<std::string>{"dense_h_to_4h.weight", "dense_h_to_4h.bias",
                                          "dense_4h_to_h.weight", "dense_4h_to_h.bias"};
  }
};

// One layer's new parts in the new model's dtype.
void add_layer_parts(io::SafetensorsWriter& writer, const std::string& p, const LayerParts& parts,
                     io::DType dtype, std::int64_t d) {
  const RowMatrix<double> w = parts.weight;  // row-major [d, d]
  writer.add(p + "surrogate.weight", dtype, {d, d},
             std::span<const double>(w.data(), static_cast<std::size_t>(w.size())));
  writer.add(p + "surrogate.bias", dtype, {d},
             std::span<const double>(parts.bias.data(), static_cast<std::size_t>(d)));
  if (parts.gated) {
    writer.add(p + "gate.weight", dtype, {d},
               std::span<const double>(parts.gate_weight.data(), static_cast<std::size_t>(d)));
    writer.add(p + "gate.bias", dtype, {1}, std::span<const double>(&parts.gate_bias, 1));
    writer.add(p + "gate.threshold", dtype, {1}, std::span<const double>(&parts.gate_threshold, 1));
  }
}

// The new weights: every tensor of the source but the full MLPs of layers that become linear,
// and the new parts (F32, or F64 when the model itself is stored in F64).
io::SafetensorsWriter new_weights(const fs::path& model_dir, const ModelConfig& config,
                                  const std::vector<Index>& layers,
                                  const std::vector<LayerParts>& parts) {
  const auto files = open_weights(model_dir);
  MlpTensorNames names{&config};
  for (const auto& f : files)
    names.prefixed = names.prefixed || f.contains("transformer.wte.weight");
  std::set<std::string> dropped;  // the full-MLP tensors of layers that become linear
  for (std::size_t k = 0; k < layers.size(); ++k) {
    if (!parts[k].gated) {
      for (const auto& n : names.full())
        dropped.insert(names.prefix(layers[k]) + n);
    }
  }
  io::SafetensorsWriter writer;
  io::DType new_dtype = io::DType::F32;
  for (const auto& f : files) {
    for (const auto& t : f.tensors()) {
      if (t.dtype == io::DType::F64)
        new_dtype = io::DType::F64;
      if (!dropped.count(t.name))
        copy_tensor(f, t, writer);
    }
  }
  for (std::size_t k = 0; k < layers.size(); ++k)
    add_layer_parts(writer, names.prefix(layers[k]), parts[k], new_dtype, config.d_model);
  writer.set_metadata("format", "pt");
  writer.set_metadata("nlb_linearized_from", model_dir.string());
  return writer;
}

// config.json: the source's keys, plus every layer's MLP kind.
nlohmann::json new_config(const fs::path& model_dir, const ModelConfig& config,
                          const std::vector<Index>& layers, const std::vector<LayerParts>& parts) {
  nlohmann::json config_json;
  {
    std::ifstream in(model_dir / "config.json");
    config_json = nlohmann::json::parse(in);
  }
  std::vector<std::string> kinds;
  for (Index l = 0; l < config.n_layers; ++l)
    kinds.emplace_back(to_string(config.mlp_kind(l)));
  for (std::size_t k = 0; k < layers.size(); ++k)
    kinds[static_cast<std::size_t>(layers[k])] = parts[k].gated ? "gated" : "linear";
  config_json["nlb_mlp_kinds"] = kinds;
  return config_json;
}

// linearize.json: where every new part came from.
nlohmann::json linearize_record(const fs::path& model_dir, const std::vector<Index>& layers,
                                const std::vector<LayerParts>& parts, const Args& args,
                                const FitSettings& fit) {
  const bool gated = args.has("gates");
  nlohmann::json record{{"source", model_dir.string()},
                        {"mode", gated ? "gated" : "linear"},
                        {"layers", nlohmann::json::array()}};
  for (std::size_t k = 0; k < layers.size(); ++k) {
    nlohmann::json entry{{"layer", layers[k]}, {"kind", parts[k].gated ? "gated" : "linear"}};
    if (!parts[k].gated)
      entry["surrogate_r2"] = parts[k].r2;
    record["layers"].push_back(entry);
  }
  if (gated) {
    record["gates"] = args.get("gates");
  } else {
    record["fit"] = {
        {"tokens", fit.tokens.path},
        {"positions", fit.positions},
        {"context", fit.context},
        {"lambda", fit.lambda},
        {"model_dtype", "float64"},
        {"ridge", "float64, eigendecomposition of the centered Gram matrix (PAPERS §A1)"}};
  }
  return record;
}

// The files of the new model directory, with the source's companion files (tokenizer, …).
void write_model_files(const fs::path& dir, const fs::path& model_dir,
                       const io::SafetensorsWriter& weights, const nlohmann::json& config,
                       const nlohmann::json& record) {
  weights.write(dir / "model.safetensors");
  std::ofstream(dir / "config.json") << config.dump(2) << "\n";
  std::ofstream(dir / "linearize.json") << record.dump(2) << "\n";
  for (const auto& entry : fs::directory_iterator(model_dir)) {
    if (entry.is_regular_file() && is_companion_file(entry.path().filename().string()))
      fs::copy_file(entry.path(), dir / entry.path().filename());
  }
  if (!fs::exists(dir / "config.json") || fs::file_size(dir / "config.json") == 0)
    throw Error(dir.string() + ": could not write config.json");
}

// Everything goes to a temporary directory next to the output, renamed into place at the end
// (an existing non-empty output, allowed by --force, is replaced only then).
void write_model_dir(const fs::path& out_dir, const fs::path& model_dir,
                     const io::SafetensorsWriter& weights, const nlohmann::json& config,
                     const nlohmann::json& record) {
  const fs::path parent = fs::absolute(out_dir).lexically_normal().parent_path();
  fs::create_directories(parent);
  const std::string stem = "." + out_dir.filename().string();
  const fs::path tmp = parent / (stem + ".tmp-linearize-" + std::to_string(::getpid()));
  const fs::path old = parent / (stem + ".old-linearize-" + std::to_string(::getpid()));
  std::error_code ignored;
  try {
    fs::remove_all(tmp, ignored);
    fs::create_directory(tmp);
    write_model_files(tmp, model_dir, weights, config, record);
    if (fs::exists(out_dir) && is_nonempty_dir(out_dir)) {
      fs::rename(out_dir, old);  // only with --force (checked before)
      fs::rename(tmp, out_dir);
      fs::remove_all(old, ignored);
    } else {
      if (fs::exists(out_dir))
        fs::remove(out_dir);  // an empty directory
      fs::rename(tmp, out_dir);
    }
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ignored);
    throw Error(out_dir.string() + ": cannot write the model directory: " + e.what());
  } catch (...) {
    fs::remove_all(tmp, ignored);
    throw;
  }
}

// One line per layer, then the directory.
void print_linearize_summary(const std::vector<Index>& layers, const std::vector<LayerParts>& parts,
                             const Args& args, const fs::path& out_dir) {
  for (std::size_t k = 0; k < layers.size(); ++k) {
    if (parts[k].gated) {
      std::printf("layer %lld: gated (surrogate and gate from %s)\n",
                  static_cast<long long>(layers[k]), args.get("gates").c_str());
    } else {
      std::printf("layer %lld: linear (ridge surrogate, fit R2 %.6f)\n",
                  static_cast<long long>(layers[k]), parts[k].r2);
    }
  }
  std::printf("wrote %s\n", out_dir.string().c_str());
}

}  // namespace

int run_linearize(const std::vector<std::string>& argv) {
  const Args args(argv,
                  {"model", "layers", "gates", "out", "fit-text", "fit-tokens-file", "token-dtype",
                   "fit-positions", "context", "lambda"},
                  {"force"},
                  {{"fit-tokens", "--fit-positions N",
                    "the number of fit positions; --fit-tokens-file FILE is a fit token-id file"}});
  const fs::path model_dir = args.get("model", default_model().string());
  const fs::path out_dir = args.get("out");
  const bool gated = args.has("gates");
  check_fit_options(args, gated);
  check_output_dir(out_dir, model_dir, args.flag("force"));
  const ModelConfig config = read_linearize_config(model_dir);
  const std::vector<Index> layers = read_layers(args, config, model_dir / "config.json");
  std::vector<LayerParts> parts;
  FitSettings fit;  // without --gates
  if (gated) {
    parts = read_gate_parts(args.get("gates"), layers, config.d_model);
  } else {
    fit = fit_settings(args, config, model_dir);
    parts = fit_layers(model_dir, fit, layers);
  }
  const auto weights = new_weights(model_dir, config, layers, parts);
  const auto config_json = new_config(model_dir, config, layers, parts);
  write_model_dir(out_dir, model_dir, weights, config_json,
                  linearize_record(model_dir, layers, parts, args, fit));
  print_linearize_summary(layers, parts, args, out_dir);
  return 0;
}

}  // namespace nlb::cli
