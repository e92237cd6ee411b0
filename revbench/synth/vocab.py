"""Word lists for the synthetic world: topics per category, names, institutions and their aliases."""

from __future__ import annotations

TOPICS: dict[str, dict[str, list[str]]] = {
    "cs.AI": {
        "planning": ["classical planning", "heuristic search", "plan repair", "temporal planning", "PDDL domains", "task decomposition", "goal recognition", "Monte Carlo tree search"],
        "knowledge": ["knowledge graphs", "ontology alignment", "description logics", "commonsense reasoning", "rule learning", "entity linking", "knowledge base completion", "symbolic reasoning"],
        "multiagent": ["multi-agent coordination", "mechanism design", "auction theory", "negotiation agents", "social choice", "cooperative games", "emergent communication", "team formation"],
        "constraints": ["constraint satisfaction", "SAT solving", "answer set programming", "combinatorial optimization", "MaxSAT", "local search", "constraint propagation", "scheduling problems"],
        "agents_llm": ["LLM agents", "tool use", "agent benchmarks", "self-reflection", "autonomous web agents", "memory architectures", "agent planning", "multi-step reasoning"],
    },
    "cs.CL": {
        "mt": ["machine translation", "low-resource languages", "multilingual pretraining", "back-translation", "translation quality estimation", "document-level translation", "code-switching", "subword tokenization"],
        "qa": ["open-domain question answering", "retrieval-augmented generation", "reading comprehension", "multi-hop reasoning", "answer verification", "long-context modeling", "fact checking", "evidence retrieval"],
        "summarization": ["abstractive summarization", "faithfulness", "hallucination detection", "long document summarization", "dialogue summarization", "factual consistency", "content selection", "evaluation metrics"],
        "parsing": ["dependency parsing", "semantic parsing", "syntactic probing", "constituency trees", "grammar induction", "morphological analysis", "text-to-SQL", "structured prediction"],
        "alignment": ["instruction tuning", "preference optimization", "reward modeling", "RLHF", "safety alignment", "red teaming", "helpfulness", "constitutional training"],
    },
    "cs.CV": {
        "detection": ["object detection", "instance segmentation", "anchor-free detectors", "open-vocabulary detection", "panoptic segmentation", "small object detection", "detection transformers", "bounding box regression"],
        "generation": ["diffusion models", "text-to-image generation", "image editing", "latent diffusion", "video generation", "score matching", "classifier-free guidance", "image synthesis"],
        "3d": ["neural radiance fields", "3D reconstruction", "Gaussian splatting", "point clouds", "depth estimation", "novel view synthesis", "multi-view stereo", "mesh recovery"],
        "video": ["action recognition", "video understanding", "temporal grounding", "video object tracking", "spatio-temporal attention", "egocentric video", "event cameras", "video captioning"],
        "medical": ["medical image segmentation", "radiology report generation", "histopathology", "MRI reconstruction", "lesion detection", "domain shift in imaging", "few-shot medical imaging", "CT analysis"],
    },
    "cs.IR": {
        "dense": ["dense retrieval", "contrastive pretraining", "hard negative mining", "bi-encoders", "late interaction", "embedding compression", "approximate nearest neighbor search", "query encoders"],
        "recsys": ["recommender systems", "collaborative filtering", "sequential recommendation", "cold-start users", "graph neural recommenders", "session-based recommendation", "popularity bias", "implicit feedback"],
        "ranking": ["learning to rank", "neural rerankers", "click models", "counterfactual evaluation", "unbiased ranking", "listwise losses", "query performance prediction", "relevance feedback"],
        "expertise": ["expert finding", "reviewer assignment", "paper-reviewer matching", "scholarly recommendation", "citation recommendation", "author profiling", "topic modeling of publications", "peer review"],
        "conversational": ["conversational search", "query clarification", "mixed-initiative systems", "conversational recommendation", "user simulation", "query rewriting", "search interfaces", "information seeking dialogue"],
    },
    "cs.LG": {
        "optimization": ["stochastic optimization", "adaptive learning rates", "convergence analysis", "second-order methods", "loss landscapes", "learning rate schedules", "gradient noise", "implicit regularization"],
        "rl": ["reinforcement learning", "offline reinforcement learning", "policy gradients", "model-based control", "exploration bonuses", "reward shaping", "value function approximation", "multi-task policies"],
        "graphs": ["graph neural networks", "message passing", "over-smoothing", "graph transformers", "link prediction", "molecular property prediction", "graph expressivity", "node classification"],
        "theory": ["generalization bounds", "PAC-Bayes", "neural tangent kernel", "sample complexity", "benign overfitting", "online learning regret", "statistical learning theory", "kernel methods"],
        "federated": ["federated learning", "differential privacy", "client heterogeneity", "secure aggregation", "communication efficiency", "personalized federated learning", "membership inference", "privacy accounting"],
    },
}

METHOD_WORDS = ["Adaptive", "Scalable", "Robust", "Efficient", "Contrastive", "Hierarchical", "Sparse", "Causal", "Unified", "Self-Supervised", "Probabilistic", "Modular", "Lightweight", "Provable", "Structured"]
NOUNS = ["Framework", "Approach", "Method", "Benchmark", "Analysis", "Model", "Objective", "Algorithm", "Study", "Pipeline"]

# A title's own ending (``revbench.synth.draw.distinct_title``): words that name no subject, so a
# scorer reads a title's topic as before, while two works' titles differ as real ones do.
TITLE_FORMS = ["{t} in {a} {b}", "{t} under {a} {b}", "{t}, Revisited for {a} {b}", "{t} with {a} {b}",
               "{t} Beyond {a} {b}", "{t} Across {a} {b}", "{t} Given {a} {b}", "{t} at {a} {b}"]
TITLE_QUALITIES = ["Limited", "Shifting", "Realistic", "Extreme", "Bounded", "Changing", "Unknown", "Partial", "Noisy",
                   "Scarce", "Costly", "Mixed", "Delayed", "Uneven", "Tight", "Loose", "Finite", "Varying", "Hidden",
                   "Competing", "Conflicting", "Missing", "Corrupted", "Evolving", "Rare", "Skewed", "Sparse", "Coarse",
                   "Fine-Grained", "Long-Tailed", "Imperfect", "Practical", "Strict", "Relaxed", "Minimal", "Excess",
                   "Unlabeled", "Unseen", "Irregular", "Repeated", "Sequential", "Parallel", "Local", "Global", "Early",
                   "Late", "Heavy", "Light", "Open", "Closed", "Fixed", "Dynamic", "Static", "Uncertain", "Reliable",
                   "Unreliable", "Weak", "Strong", "Small", "Large", "Short", "Long", "Narrow", "Wide"]
TITLE_THINGS = ["Budgets", "Conditions", "Settings", "Regimes", "Horizons", "Constraints", "Scales", "Assumptions",
                "Scenarios", "Guarantees", "Trade-offs", "Limits", "Resources", "Feedback", "Supervision", "Priors",
                "Signals", "Samples", "Observations", "Labels", "Annotations", "Deadlines", "Costs", "Rewards",
                "Errors", "Perturbations", "Shifts", "Dependencies", "Interactions", "Structures", "Inputs", "Outputs",
                "Updates", "Queries", "Measurements", "Estimates", "Bounds", "Objectives", "Preferences", "Incentives",
                "Failures", "Delays", "Windows", "Margins", "Populations", "Distributions", "Sources", "Targets",
                "Contexts", "Environments", "Evaluations", "Protocols", "Baselines", "Budget Cuts", "Workloads",
                "Capacities", "Memories", "Views", "Modes", "Phases", "Stages", "Rounds", "Steps", "Batches"]

FIRST_NAMES = [
    "Alice", "Bob", "Carlos", "Dana", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jun", "Kavya", "Liam", "Maria", "Nikhil",
    "Olga", "Pedro", "Qing", "Rahul", "Sofia", "Tomas", "Uma", "Victor", "Wei", "Xin", "Yuki", "Zoë", "José", "Jürgen",
    "Amélie", "Søren", "Chen", "Lei", "Min", "Yan", "Hao", "Jing", "Priya", "Arjun", "Fatima", "Omar", "Leila", "Noah",
    "Emma", "Lucas", "Mia", "Ethan", "Chloé", "Mateo", "Hannah", "Ivan", "Anya", "Kenji", "Sakura", "Minh", "Thanh",
    "Ayşe", "Mehmet", "Björn", "Astrid", "Rafael", "Camila", "Diego", "Lucía", "Andrea", "Marco", "Giulia", "Pierre",
    "Élodie", "Stefan", "Katarzyna", "Piotr", "Daniel", "Sarah", "David", "Rachel", "Michael", "Laura", "Jian", "Yong",
    "Xiaoming", "Zhiwei", "Haoran", "Ruoxi", "Seo-yeon", "Ji-ho", "Abebe", "Chidi", "Ngozi", "Kwame", "Amara", "Tariq",
]
LAST_NAMES = [
    "Wang", "Li", "Zhang", "Liu", "Chen", "Yang", "Huang", "Zhao", "Wu", "Zhou", "Kim", "Lee", "Park", "Nguyen", "Tran",
    "Smith", "Johnson", "Brown", "Garcia", "Müller", "Schmidt", "Rossi", "Bianchi", "Dubois", "Martin", "Kowalski",
    "Nowak", "Ivanov", "Petrov", "Sato", "Suzuki", "Takahashi", "Tanaka", "Gupta", "Sharma", "Patel", "Singh", "Kumar",
    "Rao", "Iyer", "Hernández", "López", "Pérez", "Silva", "Santos", "Oliveira", "Costa", "Yilmaz", "Kaya", "Öztürk",
    "Andersson", "Johansson", "Nielsen", "Hansen", "Jensen", "O'Brien", "Murphy", "Kelly", "Cohen", "Levi", "Friedman",
    "Okafor", "Mensah", "Abdullah", "Haddad", "Rahman", "Hosseini", "Ahmadi", "Novak", "Horvat", "de Vries", "van Dijk",
    "Janssen", "Fischer", "Weber", "Wagner", "Becker", "Hoffmann", "Schulz", "Koch", "Richter", "Klein", "Wolf",
]

# (canonical name, aliases seen in PDFs, a department, an email domain under .example)
INSTITUTIONS: list[tuple[str, list[str], str, str]] = [
    ("Massachusetts Institute of Technology", ["MIT", "MIT CSAIL"], "Computer Science and Artificial Intelligence Laboratory", "mit.example"),
    ("Carnegie Mellon University", ["CMU", "Carnegie Mellon Univ."], "School of Computer Science", "cmu.example"),
    ("Stanford University", ["Stanford", "Stanford Univ."], "Department of Computer Science", "stanford.example"),
    ("University of California, Berkeley", ["UC Berkeley", "Berkeley"], "EECS Department", "berkeley.example"),
    ("Tsinghua University", ["THU", "Tsinghua Univ."], "Department of Computer Science and Technology", "tsinghua.example"),
    ("Peking University", ["PKU", "Peking Univ."], "School of Computer Science", "pku.example"),
    ("ETH Zurich", ["ETH Zürich", "Swiss Federal Institute of Technology"], "Department of Computer Science", "ethz.example"),
    ("University of Oxford", ["Oxford University", "Univ. of Oxford"], "Department of Engineering Science", "ox.example"),
    ("University of Toronto", ["UofT", "U of T"], "Department of Computer Science", "utoronto.example"),
    ("Max Planck Institute for Informatics", ["MPI-INF", "MPI Informatics"], "Department of Computer Vision", "mpi-inf.example"),
    ("Korea Advanced Institute of Science and Technology", ["KAIST"], "School of Computing", "kaist.example"),
    ("National University of Singapore", ["NUS"], "School of Computing", "nus.example"),
    ("University of Washington", ["UW", "Univ. of Washington"], "Paul G. Allen School", "uw.example"),
    ("University College London", ["UCL"], "Department of Computer Science", "ucl.example"),
    ("École Polytechnique Fédérale de Lausanne", ["EPFL"], "School of Computer and Communication Sciences", "epfl.example"),
    ("University of Edinburgh", ["Edinburgh University", "Univ. of Edinburgh"], "School of Informatics", "ed.example"),
    ("Indian Institute of Science", ["IISc", "IISc Bangalore"], "Department of Computer Science and Automation", "iisc.example"),
    ("University of Tokyo", ["UTokyo", "The University of Tokyo"], "Graduate School of Information Science", "u-tokyo.example"),
    ("Technical University of Munich", ["TUM", "TU Munich", "Technische Universität München"], "School of Computation", "tum.example"),
    ("Google Research", ["Google", "Google DeepMind"], "Research", "google.example"),
    ("Microsoft Research", ["MSR", "Microsoft"], "Research", "microsoft.example"),
    ("Allen Institute for AI", ["AI2", "Allen AI"], "Research", "allenai.example"),
    ("University of Amsterdam", ["UvA", "Universiteit van Amsterdam"], "Informatics Institute", "uva.example"),
    ("McGill University", ["McGill", "Mila / McGill"], "School of Computer Science", "mcgill.example"),
]

ABSTRACT_TEMPLATES = [
    "We study {k0} and its connection to {k1}.",
    "Existing approaches to {k0} struggle with {k2}, which limits their use in practice.",
    "We propose {name}, a {adj} method that combines {k1} with {k3}.",
    "Our analysis shows that {k2} can be handled without sacrificing {k0}.",
    "Experiments on standard benchmarks for {k1} show consistent gains over strong baselines.",
    "We further examine {k3} and report ablations on {k4}.",
    "The results suggest that {k4} is a key ingredient for {k0}.",
    "Code and data for {k1} are released to support future work on {k2}.",
]
