#!/usr/bin/env python3
"""Checks an exported bundled model with transformers, and optionally against tandem.

  verify.py --model bundled/tandem-tiny-chat                    greedy samples (plain and chat)
  verify.py --model bundled/tandem-tiny-chat --tandem build/release/tandem
                                                                 + tandem's greedy ids and logits

Both sides get the same prompt ids (tandem's own tokenisation, reported in its --json output);
transformers runs in float32 on the CPU with the model's generation_config.json stop ids.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

PLAIN_PROMPTS = ["Once upon a time", "It was a fine morning, and", "\"My dear,\" said Mrs."]
CHAT_PROMPTS = ["Tell me a story about Elizabeth.", "What happened to Anne?", "Tell me a story."]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="bundled/tandem-tiny-chat")
    ap.add_argument("--tandem", help="path of the tandem binary to compare with")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import sentencepiece as spm
    import torch
    from transformers import AutoTokenizer, GenerationConfig, JambaForCausalLM

    torch.set_num_threads(args.threads)
    model = JambaForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    gen = GenerationConfig.from_pretrained(args.model)
    eos = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.model, "tokenizer.model"))
    tok = AutoTokenizer.from_pretrained(args.model, use_fast=False)

    def greedy(ids, n):
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                                 eos_token_id=eos, pad_token_id=gen.pad_token_id)
        return out[0, len(ids):].tolist()

    print("== transformers, float32, greedy ==")
    for p in PLAIN_PROMPTS:
        ids = [sp.bos_id()] + sp.encode(p)
        new = greedy(ids, args.max_new_tokens)
        print(json.dumps({"prompt": p, "completion": sp.decode(new)}, ensure_ascii=False))
    for q in CHAT_PROMPTS:
        text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                       add_generation_prompt=True)
        ids = sp.encode(text)  # what tandem's Chat does: render, then encode without bos
        new = greedy(ids, 80)
        print(json.dumps({"user": q, "assistant": sp.decode([i for i in new if i not in eos]),
                          "stopped_at_end_of_turn": bool(new) and new[-1] in eos},
                         ensure_ascii=False))

    if not args.tandem:
        return 0
    print("== tandem vs transformers ==")
    failures = 0
    for p in PLAIN_PROMPTS[:1] + PLAIN_PROMPTS[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            npy = os.path.join(tmp, "logits.npy")
            run = subprocess.run(
                [args.tandem, "generate", "--model", args.model, "--prompt", p,
                 "--max-new-tokens", str(args.max_new_tokens), "--greedy", "--json",
                 "--dump-logits", npy], capture_output=True, text=True)
            if run.returncode != 0:
                print("tandem failed (%d): %s" % (run.returncode, run.stderr.strip()))
                return 1
            result = json.loads(run.stdout.strip().splitlines()[-1])
            tandem_logits = np.load(npy)
        prompt_ids, tandem_ids = result["prompt_ids"], result["output_ids"]
        hf_ids = greedy(prompt_ids, args.max_new_tokens)
        with torch.no_grad():
            seq = torch.tensor([prompt_ids + tandem_ids])
            hf_logits = model(input_ids=seq, use_cache=False).logits[0].float().numpy()
        rows = hf_logits[len(prompt_ids) - 1:len(prompt_ids) - 1 + len(tandem_ids)]
        diff_last_prompt = float(np.abs(rows[0] - tandem_logits[0]).max())
        diff_all = float(np.abs(rows - tandem_logits[:len(rows)]).max())
        same = hf_ids == tandem_ids
        failures += not same
        print(json.dumps({"prompt": p, "prompt_ids": prompt_ids, "identical_greedy_ids": same,
                          "tokens": len(tandem_ids),
                          "max_abs_logit_diff_last_prompt_position": diff_last_prompt,
                          "max_abs_logit_diff_all_rows": diff_all,
                          "tandem_text": result["text"]}, ensure_ascii=False))
        if not same:
            print("  tandem      :", tandem_ids)
            print("  transformers:", hf_ids)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
