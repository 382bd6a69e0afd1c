// DeepL's Node client (deepl-node) against aiayn serve: every call of the scenario below, its
// results (or the class of the error it raised) written as one JSON object on stdout, for
// tests/serve/test_deepl_node.py to check. The server and keys come from the environment.
'use strict';

const fs = require('fs');
const deepl = require('deepl-node');

const env = process.env;
const options = { serverUrl: env.DEEPL_URL, maxRetries: 0 };

async function refusal(call) {
    try {
        await call();
        return null;
    } catch (error) {
        return error.constructor.name;
    }
}

async function main() {
    const client = new deepl.DeepLClient(env.DEEPL_KEY, options);
    const out = {};
    const one = await client.translateText(env.TEXT, 'de', 'en-US');
    out.one = { text: one.text, detected: one.detectedSourceLang, billed: one.billedCharacters };
    const many = await client.translateText([env.TEXT, env.OTHER], null, 'en-GB');
    out.many = many.map((r) => r.text);
    const tagged = await client.translateText(env.TAGGED, 'de', 'en-US', {
        tagHandling: 'xml',
        ignoreTags: ['x'],
    });
    out.tagged = tagged.text;
    out.sources = (await client.getSourceLanguages()).map((l) => l.code);
    out.targets = (await client.getTargetLanguages()).map((l) => [l.code, l.supportsFormality]);
    out.pairs = (await client.getGlossaryLanguagePairs()).map((p) => [p.sourceLang, p.targetLang]);

    const entries = new deepl.GlossaryEntries({ entries: { [env.TERM]: env.TARGET_TERM } });
    const glossary = await client.createGlossary('node', 'de', 'en', entries);
    out.glossary = { ready: glossary.ready, count: glossary.entryCount, time: !isNaN(glossary.creationTime) };
    out.listed = (await client.listGlossaries()).map((g) => g.glossaryId).includes(glossary.glossaryId);
    out.entries = (await client.getGlossaryEntries(glossary)).entries();
    const withTerms = await client.translateText(env.TEXT, 'de', 'en-US', { glossary });
    out.with_glossary = withTerms.text;
    await client.deleteGlossary(glossary);
    out.deleted = await refusal(() => client.getGlossary(glossary.glossaryId));

    const multi = await client.createMultilingualGlossary('node v3', [
        { sourceLangCode: 'de', targetLangCode: 'en', entries },
    ]);
    out.v3 = multi.dictionaries.map((d) => [d.sourceLangCode, d.targetLangCode, d.entryCount]);
    const v3entries = await client.getMultilingualGlossaryDictionaryEntries(multi, 'de', 'en');
    out.v3_entries = v3entries.entries.entries();
    await client.deleteMultilingualGlossary(multi);

    const status = await client.translateDocument(env.DOC_IN, env.DOC_OUT, 'de', 'en-US');
    out.document = { done: status.done(), billed: status.billedCharacters };
    const usage = await client.getUsage();
    out.usage = [usage.character.count, usage.character.limit];

    out.wrong_key = await refusal(() =>
        new deepl.Translator(env.DEEPL_WRONG_KEY, options).translateText(env.TEXT, 'de', 'en-US'),
    );
    out.spent = await refusal(() =>
        new deepl.Translator(env.DEEPL_SPENT_KEY, options).translateText(env.TEXT, 'de', 'en-US'),
    );
    process.stdout.write(JSON.stringify(out));
}

main().catch((error) => {
    process.stderr.write(`${error.constructor.name}: ${error.message}\n`);
    process.exit(1);
});
