// ESLint flat config. Every TypeScript file (src/, test/, bench/) is linted with type information
// from tsconfig.test.json, the one project that includes all three, so the promise rules see the
// real types: a floating promise or a promise passed where a void callback is expected is an error.
import eslint from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  {
    // Build outputs and scratch copies of them (see .gitignore); node_modules is ignored by default.
    ignores: ['dist/', 'dist-test/', '.h*-dist/', '.m-dist/'],
  },
  eslint.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        project: './tsconfig.test.json',
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: {
      reportUnusedDisableDirectives: 'error',
    },
    rules: {
      // Already errors in recommendedTypeChecked; restated because the router's crash-safety
      // depends on them (a rejected promise nobody awaits is an unhandled rejection).
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // `void promise` does not count as handling it: that is how a throw in the data plane's
          // handler became an unhandled rejection. Fire-and-forget calls end in .catch(...).
          ignoreVoid: false,
          // node:test's describe/it/test return a promise that the runner itself awaits; its docs
          // say the return value of a top-level test can be discarded. A subtest (t.test) is not
          // listed here: its promise must still be awaited.
          allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] }],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      // A `let` that a callback reads before its one assignment (the HTTP server's data plane,
      // main.ts's `up`) cannot be a const; every other single-assignment `let` must be.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Destructuring a key out to leave it out of the `...rest` object is how a copy without it is
      // written here (`const { hostname: _h, ...rest } = rec`); every other unused binding is an error.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
    },
  },
  {
    // Off in test/ only: the e2e tests read JSON answers (adminCall's `body`, JSON.parse of a
    // replica's or the router's output) field by field, and every value read goes straight into
    // an assert.*, so a wrong shape fails the test. Typing each answer would restate the admin
    // DTOs at ~300 reads. `no-explicit-any` stays on here too, so `any` enters a test only through
    // JSON.parse or the one reviewed exception (adminCall); src/ and bench/ keep all five rules.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // This file is plain JavaScript outside the TypeScript project.
    files: ['**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
