import { CREDENTIAL_STORAGE_KEY, parseStoredCredential, type StoredCredential } from '../logic/stored-credential.js';

/** sessionStorage may throw (disabled storage, private modes); the dashboard then keeps the credential in memory only. */
export function loadCredential(): StoredCredential | null {
  try {
    return parseStoredCredential(window.sessionStorage.getItem(CREDENTIAL_STORAGE_KEY), Date.now());
  } catch {
    return null;
  }
}

export function saveCredential(c: StoredCredential): void {
  try {
    window.sessionStorage.setItem(CREDENTIAL_STORAGE_KEY, JSON.stringify(c));
  } catch {
    // in memory only
  }
}

export function clearCredential(): void {
  try {
    window.sessionStorage.removeItem(CREDENTIAL_STORAGE_KEY);
  } catch {
    // nothing stored
  }
}
