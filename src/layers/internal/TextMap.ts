/**
 * Values keyed by statement text, for the texts a store compiles afresh for every statement it
 * runs. A `Map` keyed by such a text hashes all of it on every lookup, since a fresh string has
 * no cached hash; here a lookup goes by the text's length and compares the text with the few
 * others of that length: a comparison stops at the first character that differs, and texts of one
 * length are few.
 */
export interface TextMap<V> {
  readonly get: (text: string) => V | undefined
  readonly set: (text: string, value: V) => void
  readonly delete: (text: string) => void
  /** How many texts it holds. */
  readonly size: () => number
  /** Every text and its value, in no particular order. */
  readonly entries: () => IterableIterator<readonly [string, V]>
}

/** An empty `TextMap`. */
export const make = <V>(): TextMap<V> => {
  const byLength = new Map<number, Array<[string, V]>>()
  let size = 0
  const find = (texts: ReadonlyArray<readonly [string, V]> | undefined, text: string): number => {
    if (texts !== undefined) for (let i = 0; i < texts.length; i++) if (texts[i]![0] === text) return i
    return -1
  }
  return {
    get: (text) => {
      const texts = byLength.get(text.length)
      const at = find(texts, text)
      return at < 0 ? undefined : texts![at]![1]
    },
    set: (text, value) => {
      const texts = byLength.get(text.length) ?? []
      const at = find(texts, text)
      if (at >= 0) {
        texts[at]![1] = value
        return
      }
      if (texts.length === 0) byLength.set(text.length, texts)
      texts.push([text, value])
      size++
    },
    delete: (text) => {
      const texts = byLength.get(text.length)
      const at = find(texts, text)
      if (at < 0) return
      texts!.splice(at, 1)
      if (texts!.length === 0) byLength.delete(text.length)
      size--
    },
    size: () => size,
    entries: function*() {
      for (const texts of byLength.values()) yield* texts
    }
  }
}
