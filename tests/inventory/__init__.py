"""Tests of the inventory stage."""
