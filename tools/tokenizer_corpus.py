#!/usr/bin/env python3
"""Builds the tokenizer verification corpus, deterministically.

Writes tests/fixtures/tokenizers/corpus.jsonl (one JSON string per line) and
tests/fixtures/tokenizers/pairs.jsonl (one [query, document] JSON array per
line). Every string is written out here by hand or derived from hand-written
pieces with a fixed-seed generator, so the output never depends on the Python
version, the locale or the machine.

The strings aim at the places where tokenizers disagree: scripts with no
spaces, combining marks, compatibility characters that NFKC expands, every
kind of whitespace and control character, words longer than WordPiece's
100-character limit, special-token text inside ordinary text, and the empty
string.

JSON lines are written with ensure_ascii=False, except that U+0085, U+2028 and
U+2029 are escaped: they are valid inside JSON strings but some line readers
(Python's str.splitlines among them) treat them as line ends.

Usage: python3 tools/tokenizer_corpus.py [--out-dir tests/fixtures/tokenizers]
"""

import argparse
import json
import os
import sys

# --- Hand-written sections -------------------------------------------------

ENGLISH = [
    "Hello world",
    "Hello world!",
    "hello world",
    "HELLO WORLD",
    "How are you doing?",
    "The quick brown fox jumps over the lazy dog.",
    "A journey of a thousand miles begins with a single step.",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "The company was founded in 2016.",
    "I bought an apple for $1.00 at the store.",
    "She sells sea shells by the sea shore.",
    "To be, or not to be, that is the question:",
    "This is a test.",
    "this is a query !",
    "what was the impact of the manhattan project",
    "The Manhattan Project was a research and development undertaking during World War II.",
    "UNwantéd,running",
    "unaffable",
    "overcommunication",
    "Transformers provide thousands of pretrained models.",
    "Embeddings map sentences to dense vectors.",
    "Rerankers score a query against each candidate document.",
    "The mitochondria is the powerhouse of the cell.",
    "Photosynthesis converts light energy into chemical energy.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The Great Wall of China is visible from low Earth orbit under good conditions.",
    "In 1969, Neil Armstrong became the first person to walk on the Moon.",
    "Machine learning is a subset of artificial intelligence.",
    "The stock market fell sharply on Monday after the announcement.",
    "Please call me back at your earliest convenience.",
    "Best pizza near me open now",
    "how to reset a forgotten password",
    "symptoms of vitamin d deficiency",
    "weather tomorrow in new york",
    "who wrote pride and prejudice",
    "Jane Austen wrote Pride and Prejudice, published in 1813.",
    "cheap flights from london to tokyo",
    "Python list comprehension example",
    "The café served crème brûlée and a piña colada.",
    "Naïve coöperation at the façade of the résumé.",
    "Zoë and Chloë went to the Fête in Arlès.",
    "Once upon a time, in a land far, far away, there lived a king.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
    "The USA, the UK and the EU signed the agreement.",
    "e.g. i.e. etc. vs. Mr. Mrs. Dr. St. Jr.",
    "He said, \"It's fine.\"",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z",
    "This\n\nis\na\ntest.",
    "Line one\nLine two\nLine three",
    "Hi  Hello",
    "   leading space",
    "trailing space   ",
    "   surrounding space   ",
    "you…  ",
    "you…  you…  ",
    "weird ～ edge ～ case",
    "test $1 R2 #3 €4 £5 ¥6 ₣7 ₹8 ₱9 test",
    "A\n'll !!to?'d''d of, can't.",
    "let a = obj.toString();\ntoString();",
    "def main():\n\tpass",
    "0123456789 0 1 2 3 4 5 6 7 8 9 10 100 1000",
    "1\u00002\ufffd3",
]

CASE_AND_APOSTROPHES = [
    "I'm",
    "I'm here",
    "don't",
    "Don't stop",
    "DON'T",
    "won't can't shouldn't wouldn't",
    "'S'",
    "'s",
    "it's",
    "It'S",
    "IT'S",
    "John’s book",
    "’s",
    "rock ’n’ roll",
    "‘single’ and “double” quotes",
    "we'll they've you'd she'd've",
    "WE'LL THEY'VE YOU'D",
    "We'Ll tHeY'vE",
    "o'clock",
    "Ma'am",
    "y'all'd've",
    "'quoted'",
    "''",
    "'",
    "`backticks` and ´acute´",
    "camelCaseIdentifier",
    "PascalCaseIdentifier",
    "snake_case_identifier",
    "SCREAMING_SNAKE_CASE",
    "kebab-case-identifier",
    "iPhone eBay McDonald's O'Neill",
    "ThIs Is MiXeD cAsE",
    "HTTPServerError XMLHttpRequest",
    "ALL CAPS SENTENCE WITH WORDS",
    "Title Case Sentence With Words",
    "Ünïcödé ÜPPER and ünïcödé lower",
    "STRASSE straße Straße",
    "İstanbul ISTANBUL istanbul ıı İİ",
    "ΣΊΣΥΦΟΣ σίσυφος",
    "ǅungla ǄUNGLA ǆungla",
]

PUNCTUATION = [
    "!!!",
    "???",
    "?!?!",
    "...",
    "…",
    "......",
    "---",
    "—–-",
    "!@#$%^&*()_+-=[]{}|;':\",./<>?",
    "~`",
    "(((nested)))",
    "[[[brackets]]]",
    "{{{braces}}}",
    "<<<>>>",
    "a.b.c.d",
    "a,b,c,d",
    "a-b-c-d",
    "a_b_c_d",
    "a/b/c/d",
    "a\\b\\c\\d",
    "end.",
    ".start",
    "wait...what?!",
    "«guillemets» ‹single›",
    "¿Qué? ¡Sí!",
    "。、！？「」『』（）【】",
    "،؛؟",
    "।॥",
    "§¶†‡•",
    "©®™℠",
    "°±×÷",
    "=> -> <- <=> != == === !==",
    "**bold** __underline__ ~~strike~~",
    "#hashtag @mention $cashtag",
    "¯\\_(ツ)_/¯",
    "(╯°□°)╯︵ ┻━┻",
    ":-) :-( ;-) :D :P xD <3",
]

NUMBERS = [
    "1234567890",
    "3.14",
    "3.14159265358979323846",
    "1,000,000",
    "1.000.000,00",
    "-42",
    "+42",
    "−42",
    "1e10",
    "6.022e23",
    "0x1F 0b1010 0o777",
    "12:30 PM",
    "2024-01-15",
    "15/01/2024",
    "50%",
    "$1,234.56",
    "€1.234,56",
    "¥10000",
    "1st 2nd 3rd 4th 21st 22nd",
    "0",
    "00",
    "000",
    "0000",
    "00000",
    "000000",
    "0000000",
    "7",
    "77",
    "777",
    "7777",
    "12345",
    "123456",
    "9999999999999999999999",
    "+1 (555) 123-4567",
    "192.168.0.1",
    "v1.2.3-beta.4",
    "٠١٢٣٤٥٦٧٨٩",
    "۰۱۲۳۴۵۶۷۸۹",
    "०१२३४५६७८९",
    "০১২৩৪৫৬৭৮৯",
    "๐๑๒๓๔๕๖๗๘๙",
    "௦௧௨௩௪௫௬௭௮௯",
    "０１２３４５６７８９",
    "¹²³ ⁴⁵⁶ ₁₂₃",
    "½ ¼ ¾ ⅓ ⅞",
    "Ⅰ Ⅱ Ⅲ Ⅳ Ⅻ ⅰⅱⅲ",
    "一二三四五六七八九十百千万",
    "𝟎𝟏𝟐𝟑 𝟘𝟙𝟚𝟛",
    "The year 1999 and the year 2000",
    "pi is approximately 3.14159",
]

SCRIPTS = [
    # Chinese
    "生活的真谛是",
    "我爱自然语言处理。",
    "北京是中华人民共和国的首都。",
    "今天天气很好，我们去公园散步吧！",
    "机器学习是人工智能的一个分支。",
    "中文和English混合的句子",
    "繁體中文與簡體中文",
    "𠀀𠀁𠀂 𪚥 𩸽",
    "中国科学院计算技术研究所",
    "你好",
    # Japanese
    "こんにちは世界",
    "ひらがなとカタカナと漢字",
    "東京は日本の首都です。",
    "私は学生です。",
    "カタカナ",
    "ｶﾀｶﾅ ﾊﾝｶｸ",
    "ありがとうございます",
    "今日は良い天気ですね。",
    "日本語の文章を書く",
    "ガギグゲゴ パピプペポ",
    "ゔ ヴ ㋐ ㌀",
    # Korean
    "안녕하세요",
    "안녕하세요 세계",
    "대한민국의 수도는 서울입니다.",
    "한국어 자연어 처리",
    "나는 학생입니다.",
    "\u1100\u1161\u11a8 decomposed jamo",
    "ㄱㄴㄷㄹ ㅏㅑㅓㅕ",
    "한글과 漢字 混用",
    # Thai, Lao, Khmer, Myanmar
    "สวัสดีครับ",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
    "ผมชอบกินข้าวผัด",
    "ສະບາຍດີ",
    "សួស្តី",
    "မင်္ဂလာပါ",
    # Arabic, Persian, Urdu
    "مرحبا بالعالم",
    "اللغة العربية جميلة",
    "القاهرة هي عاصمة مصر.",
    "كتب الطالبُ الدرسَ",
    "سلام دنیا",
    "اردو ایک خوبصورت زبان ہے",
    "ﷺ ﷽",
    "العربية English mixed نص",
    # Hebrew, Yiddish
    "שלום עולם",
    "ירושלים היא עיר הבירה של ישראל.",
    "בְּרֵאשִׁית בָּרָא אֱלֹהִים",
    "ייִדיש",
    # Devanagari and other Indic
    "नमस्ते दुनिया",
    "हिन्दी भारत की राजभाषा है।",
    "संस्कृतम्",
    "मैं घर जा रहा हूँ।",
    "क्षत्रिय ज्ञान श्री",
    "தமிழ் ஒரு பழமையான மொழி",
    "வணக்கம்",
    "சென்னை தமிழ்நாட்டின் தலைநகரம்",
    "বাংলা ভাষা",
    "আমি তোমাকে ভালোবাসি",
    "ঢাকা বাংলাদেশের রাজধানী",
    "ગુજરાતી ਪੰਜਾਬੀ తెలుగు ಕನ್ನಡ മലയാളം ଓଡ଼ିଆ",
    "සිංහල",
    "བོད་ཡིག",
    # Cyrillic
    "Привет мир",
    "Москва — столица России.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "ПРИВЕТ привет ПрИвЕт",
    "Україна, Київ, їжак, ґанок",
    "Српски језик ћирилица",
    "Беларуская мова ў",
    "Ёлка и ёжик",
    # Greek
    "Γεια σου κόσμε",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "ΑΒΓΔΕ αβγδε",
    "ἐν ἀρχῇ ἦν ὁ λόγος",
    "ὈΔΥΣΣΕΎΣ",
    # Armenian, Georgian, Ethiopic, Mongolian, Cherokee
    "Բարեւ աշխարհ",
    "Հայաստանի մայրաքաղաքը Երևանն է։",
    "ﬓﬔ և",
    "გამარჯობა მსოფლიო",
    "საქართველოს დედაქალაქი თბილისია.",
    "ᲒᲐᲛᲐᲠᲯᲝᲑᲐ",
    "ሰላም ልዑል",
    "ᠮᠣᠩᠭᠣᠯ",
    "ᏣᎳᎩ",
    # Latin with diacritics
    "Tiếng Việt có nhiều dấu thanh.",
    "Xin chào thế giới",
    "Türkçe: ğüşıöç ĞÜŞİÖÇ",
    "Zażółć gęślą jaźń",
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Árvíztűrő tükörfúrógép",
    "Ærøskøbing Ålborg Øresund",
    "Þórður Ðrífa",
    "Grüß Gott, Fräulein Müller!",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "El niño comió jalapeños en España.",
    "Ação, coração, não, João",
    "Mëtàl Ümläüts",
    "Dziękuję bardzo",
    "Kiitos paljon",
    "Ευχαριστώ Спасибо Danke Merci Gracias Grazie Obrigado",
    # Mixed scripts
    "Hello 世界 مرحبا мир 🌍",
    "東京 Tokyo Токио طوكيو",
    "Englishと日本語のmixed文",
    "αβγ abc абв אבג",
    "iPhone 15 Pro Max 价格",
    "COVID-19 疫情",
    "Emoji😀in🎉the中间of文字",
]

EMOJI = [
    "😀",
    "😂 👍 🤣 😍 😭 🎉 🙏 😊 🔥 😁 😅 🤗 😆 👏 ❤️ 💜 💚 💗 💙 🖤 😎 👌 🥳 💪 ✨ 👉 👀 💯 🎈 🙈 🙌 💀 👇 👋 ✅ 🎁 🌞 🌸 💰",
    "✨ 🤗 👁️ 👱🏻 🕵‍♂️ 🧙🏻‍♂ 👨🏻‍🌾 🧑‍🤝‍🧑 👩‍❤‍💋‍👨 👩‍👩‍👧‍👦 🧑🏻‍🤝‍🧑🏻 🏴󠁧󠁢󠁥󠁮󠁧󠁿 👨🏻‍❤️‍💋‍👨🏼",
    "👨‍👩‍👧‍👦",
    "👩🏽‍💻",
    "🏳️‍🌈",
    "🏳️‍⚧️",
    "🇺🇸 🇬🇧 🇯🇵 🇩🇪 🇫🇷 🇨🇳 🇮🇳 🇧🇷",
    "🇺🇸🇬🇧🇯🇵",
    "🇦",
    "👍🏻 👍🏼 👍🏽 👍🏾 👍🏿",
    "👋🏿",
    "🏻",
    "❤",
    "❤️",
    "☺️ ☺",
    "1️⃣ 2️⃣ #️⃣ *️⃣",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "I love you ❤️!",
    "Great job 👏👏👏",
    "🔥🔥🔥🔥🔥🔥🔥🔥🔥🔥",
    "😀😃😄😁😆😅🤣😂🙂🙃",
    "🐶🐱🐭🐹🐰🦊🐻🐼",
    "🍕 pizza 🍔 burger 🍟 fries",
    "Flight ✈️ to Tokyo 🗼 on 📅 Monday",
    "🧑‍🚀 astronaut 👩‍🔬 scientist",
    "⌚ ⌛ ☕ ♈ ⚡ ⛄",
    "©️ ®️ ™️",
    "🫠🫡🫥🫶",
    "👁‍🗨",
    "emoji🙂without🙂spaces",
]

COMBINING = [
    "e\u0301",
    "cafe\u0301",
    "re\u0301sume\u0301",
    "n\u0303 a\u0300 o\u0308 u\u0302",
    "A\u030a vs \u00c5 vs \u212b",
    "Zalgo: Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034da\u036b\u0357\u0364\u0361\u0308\u0328\u0321l\u036c\u0357\u033fg\u036e\u0352\u0300o\u0359\u0354",
    "a\u0300\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308\u0309",
    "\u0301 orphan combining mark at start",
    "word \u0301 after space",
    "\u0301",
    "\u0308\u0308\u0308",
    "Vie\u0323\u0302t Nam",
    "ệ ệ ệ",
    "ḍ\u0307 q\u0307\u0323",
    "o\u0328\u0304 \u01ed",
    "\u1e9b\u0323",
    "\u0041\u030a\u0301",
    "\u0915\u094d\u0937",
    "\u0e01\u0e34\u0e4a",
    "i\u0307stanbul",
    "\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd",
    "\u0627\u064e\u0644\u0652\u0639\u064e\u0631\u064e\u0628\u0650\u064a\u0651\u064e\u0629\u064f",
    "e\u20dd e\u20e3 a\u0338",
    "\u00e9\u0301",
    "\u1f00\u0345 \u1f80",
    "\u0063\u0327\u0306",
]

COMPATIBILITY = [
    "ﬁ",
    "ﬁnance ﬂow ﬀ ﬃ ﬄ ﬅ ﬆ",
    "①②③④⑤⑥⑦⑧⑨⑩",
    "⑴ ⒈ ⓐ Ⓐ",
    "Ｆｕｌｌ",
    "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ　１２３",
    "ＡＢＣ ａｂｃ ！？",
    "㎏ ㎞ ㎡ ㏄ ㍉ ㌔",
    "™ ℠ ℡ ℀",
    "ℌℑℜℭ ℍℕℙℚℝℤ",
    "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 𝓢𝓬𝓻𝓲𝓹𝓽 𝔉𝔯𝔞𝔨𝔱𝔲𝔯",
    "Ⅻ ⅻ ↉",
    "ｱｲｳｴｵ ﾞﾟ",
    "ﾟﾞｶﾞ",
    "\u212a\u212b \u2126",
    "ǆ Ǆ ǅ",
    "ſ ẛ",
    "ﷺ",
    "ﷻ ﷲ",
    "㈱ ㊤ ㊥ ㊦",
    "⁰ⁱ⁴ ᵃᵇᶜ",
    "﹏ ﹐ ﹑ ︰",
    "…‥",
    "µ μ",
    "ﾠ ㅤ",
    "ﬀﬁﬂﬃﬄ",
    "\u00a8 \u00af \u00b4 \u00b8",
    "\u2474\u2475",
]

WHITESPACE = [
    "tab\tseparated\tvalues",
    "\t",
    "\t\t\t",
    "a\u00a0b",
    "non\u00a0breaking\u00a0space",
    "\u00a0",
    "en\u2000quad",
    "em\u2001quad",
    "en\u2002space",
    "em\u2003space",
    "three\u2004per\u2005em\u2006space",
    "figure\u2007space",
    "punctuation\u2008space",
    "thin\u2009space",
    "hair\u200aspace",
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
    "ideographic\u3000space",
    "日本\u3000語",
    "\u3000",
    "\ufeffBOM at start",
    "BOM\ufeffin middle",
    "\ufeff",
    "line\u2028separator",
    "paragraph\u2029separator",
    "\u2028\u2029",
    "windows\r\nline\r\nendings",
    "old mac\rline endings",
    "\r\n",
    "\r",
    "\n",
    "\n\n\n",
    "a\n",
    "\na",
    "vertical\u000btab",
    "form\u000cfeed",
    "ogham\u1680space",
    "narrow\u202fno-break",
    "medium\u205fmath",
    "mongolian\u180evowel",
    "multiple  spaces",
    "multiple     spaces     here",
    "  ",
    "     ",
    "          ",
    " a",
    "a ",
    " a ",
    "  a  ",
    " \t\n\r\u00a0\u3000 ",
    " \n ",
    "word \n word",
    "a\t \tb",
    "trailing newline\n",
    "\n\nleading newlines",
    "mixed \u00a0\u2003\u3000 whitespace",
]

CONTROL = [
    "\u0000",
    "a\u0000b",
    "\u0000\u0000\u0000",
    "null\u0000byte",
    "\u0001\u0002\u0003\u0004\u0005\u0006\u0007",
    "\u0008\u000e\u000f\u0010\u0011\u0012\u0013",
    "\u0014\u0015\u0016\u0017\u0018\u0019\u001a",
    "\u001b[31mred\u001b[0m",
    "\u001c\u001d\u001e\u001f",
    "a\u001cb\u001dc\u001ed\u001ff",
    "bell\u0007",
    "back\u0008space",
    "\u007f",
    "del\u007fete",
    "\u0080\u0081\u008a\u009f",
    "next\u0085line",
    "\u0085",
    "zero\u200bwidth\u200bspace",
    "\u200b",
    "zero\u200cwidth\u200cnon\u200cjoiner",
    "zero\u200dwidth\u200djoiner",
    "\u200b\u200c\u200d",
    "word\u2060joiner",
    "soft\u00adhyphen",
    "\u00ad",
    "left\u200eto\u200fright",
    "\u202aembed\u202c \u202bembed\u202c \u202doverride\u202c \u202eoverride\u202c",
    "\u2066isolate\u2069",
    "replacement \ufffd char",
    "\ufffd\ufffd",
    "private\ue000use\uf8ff",
    "\U000f0000\U0010fffd",
    "nonchar\ufffe\uffff",
    "\U0010ffff",
    "interlinear\ufff9a\ufffab\ufffb",
    "tag\U000e0041\U000e0042",
    "variation\ufe0fselector\ufe0e",
    "\u034f grapheme joiner",
    "\u061c arabic letter mark",
    "\u180b mongolian fvs",
]

def _long_words():
    # Lengths straddle WordPiece's max_input_chars_per_word (100 characters, not bytes).
    return [
        "a" * 99,
        "a" * 100,
        "a" * 101,
        "\u00e9" * 100,
        "\u00e9" * 101,
        "x" * 300,
        "Pneumonoultramicroscopicsilicovolcanoconiosis" * 8,
        "abc" * 110,
        "Supercalifragilisticexpialidocious" * 10,
        "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz" * 5,
        "9" * 320,
        "3.14159265358979323846264338327950288419716939937510" * 7,
        "中" * 310,
        "的" * 150 + "是" * 150,
        "😀" * 120,
        "ก" * 300,
        "한" * 305,
        "-" * 300,
        "=" * 310,
        "." * 305,
        "abcdefghijklmnopqrstuvwxyz0123456789" * 10,
        "https://example.com/" + "very/long/path/segment/" * 15 + "index.html",
        "word " * 80,
        "a" * 150 + " " + "b" * 150,
        "\u00a0".join(["nbsp"] * 70),
        "ab\u0301" * 110,
        "\u0915\u094d\u0937" * 110,
    ]


CODE = [
    "def add(a, b):\n    return a + b\n",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\nprint(x.shape)",
    "class Foo(Base):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n",
    "for i in range(10):\n\tif i % 2 == 0:\n\t\tcontinue\n\tprint(f\"{i=}\")",
    "lambda x: x ** 2",
    "[x for x in xs if x is not None]",
    "#include <stdio.h>\n\nint main(void) {\n    printf(\"Hello, world!\\n\");\n    return 0;\n}\n",
    "static inline int32_t iv_max(int32_t a, int32_t b) { return a > b ? a : b; }",
    "for (size_t i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "ptr->next = NULL; *out = &buf[0];",
    "#define MAX(a,b) ((a)>(b)?(a):(b))",
    "{\"name\": \"infinity\", \"version\": 3, \"tags\": [\"a\", \"b\"], \"nested\": {\"x\": null, \"y\": true}}",
    "{\"input\": [\"hello\", \"world\"], \"model\": \"bge-small-en-v1.5\"}",
    "[1, 2.5, -3e4, \"four\", false]",
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Test</title></head>\n<body><p class=\"x\">Hello &amp; welcome</p></body>\n</html>",
    "<div id=\"main\"><a href=\"https://example.com\">link</a><br/></div>",
    "&lt;script&gt;alert(&quot;xss&quot;)&lt;/script&gt; &#39; &#x27; &nbsp;",
    "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}",
    "\\d+\\.\\d*|\\.\\d+",
    "s/foo/bar/g",
    "grep -rn \"TODO\" src/ | wc -l",
    "curl -X POST http://localhost:8080/embed -H 'Content-Type: application/json' -d '{\"inputs\":\"hi\"}'",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
    "const f = async (x) => { await g(x?.y ?? 0); };",
    "fn main() { let v: Vec<u8> = vec![1, 2, 3]; println!(\"{:?}\", v); }",
    "func (s *Server) Handle(w http.ResponseWriter, r *http.Request) {}",
    "key: value\nlist:\n  - one\n  - two\n",
    "# Heading\n\n* item one\n* item two\n\n```python\nprint(1)\n```",
    "$E = mc^2$ and \\frac{a}{b} + \\sqrt{x^2 + y^2}",
    "id,name,score\n1,alice,0.95\n2,bob,0.87\n",
    "    indented with four spaces",
    "\t\tindented with two tabs",
    "if(x){y();}else{z();}",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=1;g>>=2;h&=i|j^k;",
    "__init__ __main__ __name__",
    "x_1, x_2, x__3, _private, __dunder__",
    "0.1 + 0.2 != 0.3",
    "git commit -m \"Fix: handle \\\"quoted\\\" input\"",
    "docker run --gpus all -p 8080:80 -v $PWD/data:/data image:latest",
]

URLS_EMAILS = [
    "https://www.example.com",
    "http://example.com/path/to/page?query=1&other=two#fragment",
    "https://en.wikipedia.org/wiki/Tokenization_(lexical_analysis)",
    "ftp://files.example.org/pub/file.tar.gz",
    "www.google.com",
    "Visit https://huggingface.co/docs/tokenizers for details.",
    "https://例え.jp/パス?検索=東京",
    "https://xn--r8jz45g.jp/",
    "http://192.168.1.1:8080/admin",
    "http://[::1]:3000/",
    "mailto:someone@example.com",
    "john.doe@example.com",
    "first.last+tag@sub.domain.co.uk",
    "Contact us at support@example.org or sales@example.org.",
    "user_name-123@mail-server.example",
    "@username #topic",
    "file:///home/user/docs/report.pdf",
    "C:\\Program Files\\App\\app.exe",
    "/usr/local/bin/python3",
    "../relative/path/./file.txt",
]

SPECIAL_TOKEN_TEXT = [
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "[PAD]",
    "[UNK]",
    "[CLS] hello [SEP]",
    "[SEP] x [MASK]",
    "[CLS]hello[SEP]",
    "hello [MASK] world",
    "hello[MASK]world",
    "The capital of France is [MASK].",
    "[cls] [sep] [mask]",
    "[CLS",
    "CLS]",
    "[ CLS ]",
    "[[CLS]]",
    "<s>",
    "</s>",
    "<s>hello</s>",
    "<s> hello </s>",
    "<s></s>",
    "<s><s><s>",
    "</s> </s>",
    "<|endoftext|>",
    "hello<|endoftext|>world",
    "hello <|endoftext|> world",
    "<|endoftext|><|endoftext|>",
    "<|endoftext|",
    "<|ENDOFTEXT|>",
    "<unk>",
    "<pad>",
    "<mask>",
    "a<mask>b",
    "a <mask> b",
    " <mask>",
    "<mask> ",
    "  <mask>  x",
    "The <mask> sat on the mat.",
    "<unk> <pad> <mask> <s> </s>",
    "<|begin_of_text|>Hello",
    "<|begin_of_text|>A<|end_of_text|>B!",
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>",
    "<|system|> You are helpful. <|end|>",
    "<|placeholder1|>",
    "[INST] hello [/INST]",
    "<|padding|>",
    "<0x0A>",
    "<0xFF>",
    "▁This ▁is ▁a ▁test ▁.",
    "▁",
    "▁▁▁",
    "Ġhello Ġworld",
    "Ġ",
    "Ċ",
    "##ing",
    "##",
    "word</w>",
    "</w>",
    "âĢĶ",
]

# Texts for the added tokens of the trained-wordpiece-template fixture
# (special/normalized/lstrip/rstrip/single_word variants).
ADDED_TOKEN_TEXT = [
    "[SPECIAL_A]",
    "x [SPECIAL_A] y",
    "x[SPECIAL_A]y",
    "[special_a]",
    "a   <lstrip>   b",
    "a<lstrip>b",
    "a   <rstrip>   b",
    "a<rstrip>b",
    "a  <both>  b",
    "  <both>  ",
    "single",
    "a single word",
    "singles single-minded unsingle",
    "single.single,single",
    "New York new york NEW YORK",
    "NewYork New  York",
    "ＡＢＣ and ABC and abc",
    "@@x@@ @@",
    "ß ßß Straße ß.",
]

SINGLES = [
    "",
    " ",
    "a",
    "A",
    "z",
    "Z",
    "0",
    "9",
    ".",
    ",",
    "!",
    "?",
    "'",
    "\"",
    "-",
    "_",
    "\\",
    "/",
    "#",
    "@",
    "$",
    "%",
    "&",
    "*",
    "(",
    ")",
    "<",
    ">",
    "[",
    "]",
    "{",
    "}",
    "|",
    "~",
    "^",
    "`",
    "+",
    "=",
    ":",
    ";",
    "é",
    "ß",
    "ẞ",
    "İ",
    "ı",
    "ŉ",
    "ǰ",
    "ΐ",
    "ﬁ",
    "中",
    "あ",
    "ア",
    "한",
    "ก",
    "ا",
    "א",
    "क",
    "ж",
    "Ω",
    "Ա",
    "ა",
    "த",
    "অ",
    "€",
    "😀",
    "🇯🇵",
    "\ufffd",
    "x ",
    " x",
]

RETRIEVAL_QUERIES = [
    "what is the tallest mountain in the world",
    "how many bones are in the human body",
    "best way to learn a new language",
    "what causes the northern lights",
    "how does a transformer neural network work",
    "recipe for chocolate chip cookies",
    "who painted the mona lisa",
    "difference between a virus and bacteria",
    "how to make cold brew coffee",
    "what is the speed of light",
    "¿Cuál es la capital de España?",
    "Wie spät ist es?",
    "Quelle est la population de Paris ?",
    "日本で一番高い山は何ですか",
    "中国的首都是哪里？",
    "서울의 인구는 얼마입니까?",
    "Какая самая длинная река в мире?",
    "ما هي عاصمة المملكة العربية السعودية؟",
    "भारत की राजधानी क्या है?",
    "query: how much protein should a female eat",
    "passage: As a general guideline, the CDC's average requirement of protein for women ages 19 to 70 is 46 grams per day.",
    "Represent this sentence for searching relevant passages: what is a tokenizer",
    "search_query: vector databases",
    "search_document: A vector database indexes embeddings for nearest-neighbour search.",
]

RETRIEVAL_PASSAGES = [
    "Mount Everest is Earth's highest mountain above sea level, located in the Mahalangur Himal sub-range of the Himalayas.",
    "The adult human skeleton is made up of 206 bones, while infants are born with around 270.",
    "Immersion, spaced repetition and regular conversation practice are among the most effective ways to learn a language.",
    "Auroras are caused by charged particles from the solar wind colliding with gases in Earth's upper atmosphere.",
    "A transformer uses self-attention to weigh the relevance of every token in a sequence to every other token.",
    "Cream the butter and sugar, add eggs and vanilla, fold in flour and chocolate chips, then bake at 180°C for 10–12 minutes.",
    "The Mona Lisa was painted by Leonardo da Vinci between 1503 and 1519 and hangs in the Louvre.",
    "Bacteria are single-celled living organisms, whereas viruses need a host cell in order to replicate.",
    "Steep coarsely ground coffee in cold water for 12 to 24 hours, then filter.",
    "The speed of light in vacuum is exactly 299,792,458 metres per second.",
    "Madrid es la capital de España y su ciudad más poblada.",
    "Es ist halb drei am Nachmittag.",
    "Paris compte environ 2,1 millions d'habitants intra-muros.",
    "日本で一番高い山は富士山で、標高は3,776メートルです。",
    "中华人民共和国的首都是北京。",
    "서울의 인구는 약 950만 명입니다.",
    "Самая длинная река в мире — Нил или Амазонка, в зависимости от способа измерения.",
    "الرياض هي عاصمة المملكة العربية السعودية وأكبر مدنها.",
    "नई दिल्ली भारत की राजधानी है।",
    "Tokenizers split raw text into units such as words, subwords or bytes, and map each unit to an integer id.",
]

# Longer passages (a few hundred characters) so that truncation and pair
# handling see realistic document lengths.
PARAGRAPHS = [
    "Fatouville-Grestain est une commune du Nord-Ouest du département de l'Eure située au \nbord de l'estuaire de la Seine et à proximité du département du Calvados. Selon l'atlas des paysages \nde Haute-Normandie, elle appartient à la région naturelle du Lieuvin.",
    "The Industrial Revolution was the transition to new manufacturing processes in Great Britain, continental Europe, and the United States, that occurred during the period from around 1760 to about 1820–1840. This transition included going from hand production methods to machines.",
    "自然语言处理是计算机科学领域与人工智能领域中的一个重要方向。它研究能实现人与计算机之间用自然语言进行有效通信的各种理论和方法。自然语言处理是一门融语言学、计算机科学、数学于一体的科学。",
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。",
    "Лев Николаевич Толстой — один из наиболее известных русских писателей и мыслителей, один из величайших писателей-романистов мира. Участник обороны Севастополя.",
    "الذكاء الاصطناعي هو فرع من علوم الحاسوب يهتم بإنشاء أنظمة قادرة على أداء مهام تتطلب عادة ذكاءً بشرياً، مثل التعرف على الكلام واتخاذ القرارات والترجمة بين اللغات.",
    "Die Bundesrepublik Deutschland ist ein Bundesstaat in Mitteleuropa. Sie besteht aus 16 Ländern und ist als freiheitlich-demokratischer und sozialer Rechtsstaat verfasst.",
    "In computer science, a hash table is a data structure that implements an associative array, also called a dictionary, which maps keys to values. A hash table uses a hash function to compute an index into an array of buckets or slots.",
    "기계 학습은 경험을 통해 자동으로 개선하는 컴퓨터 알고리즘의 연구이다. 인공 지능의 한 분야로 간주된다. 컴퓨터가 학습할 수 있도록 하는 알고리즘과 기술을 개발하는 분야이다.",
    "ประเทศไทยมีประชากรประมาณ 66 ล้านคน กรุงเทพมหานครเป็นเมืองหลวงและเมืองที่ใหญ่ที่สุดของประเทศ ภาษาราชการคือภาษาไทย",
    "Q: What is the boiling point of water?\nA: At standard atmospheric pressure (101.325 kPa), water boils at 100 °C (212 °F).\n\nQ: And at the top of Everest?\nA: Roughly 70 °C.",
    "Dear Sir/Madam,\r\n\r\nI am writing to inquire about the position advertised on 12/03/2024. Please find my CV attached.\r\n\r\nKind regards,\r\nJ. Smith",
]

# --- Derived sections ------------------------------------------------------

WHITESPACE_CHARS = ["\t", "\n", "\r", "\u000b", "\u000c", " ", "\u0085", "\u00a0", "\u1680",
                    "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007",
                    "\u2008", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
                    "\ufeff", "\u200b", "\u180e"]

CONTROL_CHARS = [chr(c) for c in range(0x00, 0x20) if chr(c) not in "\t\n\r\u000b\u000c"] + ["\u007f"]


def _derived_whitespace():
    out = []
    for w in WHITESPACE_CHARS:
        out.append("hello" + w + "world")
        out.append(w + "x" + w)
        out.append(w * 3)
    return out


def _derived_control():
    # Each control character alone inside a word, so normalizers that drop it
    # (BertNormalizer clean_text) shift the offsets of what follows.
    return ["ab" + c + "cd" for c in CONTROL_CHARS]


class _Lcg:
    """Tiny deterministic generator (the constants of Numerical Recipes); the
    random module's algorithms are not promised to stay fixed across Python
    versions."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFF

    def next(self, n):
        self.state = (1664525 * self.state + 1013904223) & 0xFFFFFFFF
        return (self.state >> 8) % n


MIX_PIECES = [
    "hello", "World", "don't", "I'm", "3.14", "1,000", "-42", "中文", "日本語", "한국어", "ไทย",
    "عربي", "עברית", "हिन्दी", "Русский", "Ελληνικά", "😀", "👍🏽", "🇫🇷", "e\u0301", "ﬁ", "Ｆｕｌｌ",
    "①", "[MASK]", "<s>", "</s>", "<mask>", "<|endoftext|>", "[SEP]", "http://x.io/a?b=c",
    "a@b.co", "x=1;", "(", ")", "...", "!!", "\t", "\u00a0", "\u3000", "  ", "\n", "\u200b",
    "İ", "ß", "’s", "O'Neill", "CamelCase", "snake_case", "42", "٣", "।",
]


def _derived_mixes(count):
    gen = _Lcg(20240601)
    out = []
    for _ in range(count):
        n = 2 + gen.next(7)
        parts = []
        for _ in range(n):
            parts.append(MIX_PIECES[gen.next(len(MIX_PIECES))])
            sep = gen.next(4)
            parts.append(["", " ", " ", "  "][sep])
        out.append("".join(parts))
    return out


def _tagged_corpus():
    """[(text, section)] in corpus order, first occurrence of each text only."""
    sections = [
        ("english", ENGLISH), ("case", CASE_AND_APOSTROPHES), ("punctuation", PUNCTUATION),
        ("numbers", NUMBERS), ("scripts", SCRIPTS), ("emoji", EMOJI), ("combining", COMBINING),
        ("compatibility", COMPATIBILITY), ("whitespace", WHITESPACE), ("control", CONTROL),
        ("long", _long_words()), ("code", CODE), ("urls", URLS_EMAILS),
        ("special", SPECIAL_TOKEN_TEXT), ("added", ADDED_TOKEN_TEXT), ("singles", SINGLES),
        ("queries", RETRIEVAL_QUERIES), ("passages", RETRIEVAL_PASSAGES), ("paragraphs", PARAGRAPHS),
        ("derived_whitespace", _derived_whitespace()), ("derived_control", _derived_control()),
        ("mixes", _derived_mixes(60)),
    ]
    seen = set()
    tagged = []
    for name, strings in sections:
        for s in strings:
            if s not in seen:
                seen.add(s)
                tagged.append((s, name))
    return tagged


def build_corpus():
    return [s for s, _ in _tagged_corpus()]


# The core subset keeps the edge-case sections whole, every other string of
# the scripts section and every fourth string of the other sections (plain
# text, code, generated mixes).
CORE_SECTIONS = {"case", "punctuation", "emoji", "combining", "compatibility", "whitespace", "control",
                 "long", "special", "added", "singles"}
CORE_STRIDE = {"scripts": 2}
DEFAULT_CORE_STRIDE = 4


def core_subset(corpus):
    """A deterministic subset of the corpus (about 600 strings) for fixtures
    whose full expected output would make the fixtures too large."""
    tagged = _tagged_corpus()
    if [s for s, _ in tagged] != corpus:
        raise ValueError("core_subset needs the corpus built by build_corpus()")
    out = []
    index_in_section = {}
    for s, name in tagged:
        i = index_in_section.get(name, 0)
        index_in_section[name] = i + 1
        if name in CORE_SECTIONS or i % CORE_STRIDE.get(name, DEFAULT_CORE_STRIDE) == 0:
            out.append(s)
    return out


def build_pairs(corpus):
    """About 100 (query, document) pairs: the matching retrieval pairs, a few
    edge cases (empty sides, special-token text, long documents), then pairs
    drawn from the corpus with the fixed-seed generator."""
    pairs = list(zip(RETRIEVAL_QUERIES[:19], RETRIEVAL_PASSAGES[:19]))
    pairs += [
        ("", ""),
        ("", "document only"),
        ("query only", ""),
        (" ", " "),
        ("[CLS]", "[SEP]"),
        ("<s>", "</s>"),
        ("what is <mask>?", "a <mask> is a token"),
        ("query: short", PARAGRAPHS[1]),
        (PARAGRAPHS[0], PARAGRAPHS[2]),
        ("x" * 300, "short"),
        ("Hello 世界", "مرحبا мир 🌍"),
        ("tab\tquery", "newline\ndocument"),
        ("I'm", "don't"),
        ("e\u0301", "ﬁ Ｆｕｌｌ"),
        ("\u0000", "\u200b"),
    ]
    gen = _Lcg(77)
    seen = set(pairs)
    while len(pairs) < 100:
        q = corpus[gen.next(len(corpus))]
        d = corpus[gen.next(len(corpus))]
        if (q, d) in seen:
            continue
        seen.add((q, d))
        pairs.append((q, d))
    return pairs


def json_line(value):
    s = json.dumps(value, ensure_ascii=False)
    return s.replace("\u0085", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.join("tests", "fixtures", "tokenizers"))
    args = ap.parse_args(argv)
    corpus = build_corpus()
    pairs = build_pairs(corpus)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "corpus.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for s in corpus:
            f.write(json_line(s) + "\n")
    with open(os.path.join(args.out_dir, "pairs.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for q, d in pairs:
            f.write(json_line([q, d]) + "\n")
    print(f"corpus: {len(corpus)} strings, pairs: {len(pairs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
