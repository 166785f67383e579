// Package console will hold the ops, finance and fraud pages, roles, levers and the live funnel hub.
package console
