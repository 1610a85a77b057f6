"""Run in a side environment (transformers 4.x): load a merged export folder the way a
transformers-4 consumer does, greedy-decode one question, print JSON on stdout.

    python tf4_decode.py FOLDER QUESTION MAX_NEW_TOKENS
"""

import json
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

folder, question, max_new_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
tokenizer = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
prompt = tokenizer.apply_chat_template(
    [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
)
ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
with torch.no_grad():
    out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
new = out[0, ids.shape[1] :].tolist()
print(
    json.dumps(
        {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "rope_theta": getattr(model.config, "rope_theta", None),
            "rotary_base": float(model.model.rotary_emb.inv_freq[1] ** (-model.config.head_dim / 2)),
            "tokenizer_class": type(tokenizer).__name__,
            "prompt": prompt,
            "ids": new,
            "text": tokenizer.decode(new, skip_special_tokens=True),
        }
    )
)
