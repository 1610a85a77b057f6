"""Evaluation of adapters: probes, general-ability guard.

    dlm.judge.general  the general set: fixed passages of prose and code written for
                       dlm (package data), whose loss shows what an adapter broke
"""
